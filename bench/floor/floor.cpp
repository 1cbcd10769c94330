#include "floor.hpp"

#include <zmq.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace celer::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Answers "pi" with "po" until it receives "stop".
void serve(zmq::context_t& ctx, const std::string& endpoint, bool bind) {
  zmq::socket_t rep(ctx, zmq::socket_type::rep);
  if (bind) {
    rep.bind(endpoint);
  } else {
    rep.connect(endpoint);
  }
  for (;;) {
    zmq::message_t m;
    if (!rep.recv(m)) continue;
    const bool stop = m.to_string_view() == "stop";
    rep.send(zmq::str_buffer("po"), zmq::send_flags::none);
    if (stop) return;
  }
}

/// Round trips per second from a REQ socket to `endpoint`.
double ping(zmq::socket_t& req, double seconds) {
  // Warm up (connection set-up is not part of the floor).
  for (int i = 0; i < 100; ++i) {
    req.send(zmq::str_buffer("pi"), zmq::send_flags::none);
    zmq::message_t m;
    (void)req.recv(m);
  }
  std::size_t n = 0;
  const auto t0 = clock_type::now();
  while (seconds_since(t0) < seconds) {
    for (int i = 0; i < 100; ++i) {
      req.send(zmq::str_buffer("pi"), zmq::send_flags::none);
      zmq::message_t m;
      (void)req.recv(m);
    }
    n += 100;
  }
  const double rate = static_cast<double>(n) / seconds_since(t0);
  req.send(zmq::str_buffer("stop"), zmq::send_flags::none);
  zmq::message_t m;
  (void)req.recv(m);
  return rate;
}

} // namespace

double zmq_roundtrips_threads(double seconds) {
  zmq::context_t ctx;
  zmq::socket_t req(ctx, zmq::socket_type::req);
  req.bind("tcp://127.0.0.1:*");
  const std::string endpoint = req.get(zmq::sockopt::last_endpoint);
  std::thread server([&] { serve(ctx, endpoint, false); });
  const double rate = ping(req, seconds);
  server.join();
  return rate;
}

double zmq_roundtrips_processes(double seconds) {
  std::string endpoint;
  {
    // Find a free port by binding and releasing it in the parent.
    zmq::context_t probe;
    zmq::socket_t s(probe, zmq::socket_type::rep);
    s.bind("tcp://127.0.0.1:*");
    endpoint = s.get(zmq::sockopt::last_endpoint);
    s.set(zmq::sockopt::linger, 0);
  }
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    {
      zmq::context_t ctx;
      serve(ctx, endpoint, true);
    }  // the context's destructor flushes the last reply before the child exits
    ::_exit(0);
  }
  double rate = 0;
  {
    zmq::context_t ctx;
    zmq::socket_t req(ctx, zmq::socket_type::req);
    req.set(zmq::sockopt::rcvtimeo, 10000);  // a lost child fails the figure, not the run
    req.connect(endpoint);
    rate = ping(req, seconds);
    req.set(zmq::sockopt::linger, 0);
  }
  ::waitpid(child, nullptr, 0);
  return rate;
}

double memcpy_gigabytes(double seconds, std::size_t bytes) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  std::memcpy(to.data(), from.data(), bytes);  // touch every page first
  std::size_t n = 0;
  const auto t0 = clock_type::now();
  while (seconds_since(t0) < seconds) {
    std::memcpy(to.data(), from.data(), bytes);
    from[n % bytes] = static_cast<char>(n);  // keep the copies from being elided
    ++n;
  }
  return static_cast<double>(n) * static_cast<double>(bytes) / 1e9 / seconds_since(t0);
}

double file_write_gigabytes(double seconds, std::size_t bytes, const std::string& dir) {
  std::vector<char> from(bytes, 1);
  const std::string path = dir + "/celer-floor-write-" + std::to_string(::getpid());
  std::size_t n = 0;
  const auto t0 = clock_type::now();
  while (n == 0 || seconds_since(t0) < seconds) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return 0;
    const bool ok = std::fwrite(from.data(), 1, bytes, f) == bytes;
    std::fclose(f);
    std::remove(path.c_str());
    if (!ok) return 0;
    ++n;
  }
  return static_cast<double>(n) * static_cast<double>(bytes) / 1e9 / seconds_since(t0);
}

double file_write_kept_gigabytes(std::size_t bytes, std::size_t count, const std::string& dir) {
  std::vector<char> from(bytes, 1);
  std::vector<std::string> paths;
  constexpr std::size_t piece = 1u << 20;  // the store's file_piece_bytes
  const auto t0 = clock_type::now();
  bool ok = true;
  for (std::size_t i = 0; i < count && ok; ++i) {
    paths.push_back(dir + "/celer-floor-kept-" + std::to_string(::getpid()) + "-" + std::to_string(i));
    const int fd = ::open(paths.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) break;
    // As a spill does: reserve the space, then write 1 MiB pieces.
    ok = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) == 0 || errno == EOPNOTSUPP;
    for (std::size_t off = 0; ok && off < bytes; off += piece) {
      const std::size_t n = std::min(piece, bytes - off);
      ok = ::write(fd, from.data() + off, n) == static_cast<ssize_t>(n);
    }
    ok = ::close(fd) == 0 && ok;
  }
  const double s = seconds_since(t0);
  for (const auto& p : paths) std::remove(p.c_str());
  if (!ok || paths.size() != count) return 0;
  return static_cast<double>(count) * static_cast<double>(bytes) / 1e9 / s;
}

} // namespace celer::bench
