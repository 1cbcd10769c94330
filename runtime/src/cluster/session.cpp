#include "cluster/session.hpp"

#include "config/knobs.hpp"
#include "transport/zmq_transport.hpp"

#include <charconv>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace celer::cluster {
namespace fs = std::filesystem;

expected<endpoint_parts> parse_address(const std::string& address) {
  std::string a = address;
  if (a.rfind("tcp://", 0) == 0) a = a.substr(6);
  const auto colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) {
    return error(error_code::invalid_argument,
                 "cluster address '" + address + "' is not HOST:PORT (e.g. 127.0.0.1:6380)");
  }
  endpoint_parts p;
  p.host = a.substr(0, colon);
  const std::string port = a.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p.port);
  if (ec != std::errc() || ptr != port.data() + port.size() || p.port <= 0 || p.port > 65535) {
    return error(error_code::invalid_argument,
                 "cluster address '" + address + "' has no valid port (1-65535)");
  }
  return p;
}

std::string tcp_endpoint(const endpoint_parts& p) {
  return "tcp://" + p.host + ":" + std::to_string(p.port);
}

std::string local_ip_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) return "127.0.0.1";
  std::string out = "127.0.0.1";
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    // Connecting a UDP socket sends nothing; it only asks the kernel for the route.
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof local;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        char buf[INET_ADDRSTRLEN];
        if (::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf) != nullptr) out = buf;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

fs::path temp_root() { return fs::path(knobs().temp_dir); }

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

/// Writes `text` to `p` created with `mode` (never readable by others in between).
void write_file(const fs::path& p, const std::string& text, mode_t mode) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw exception(error_code::unavailable, "cannot write " + p.string());
  ::fchmod(fd, mode);
  const std::string line = text + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) throw exception(error_code::unavailable, "cannot write " + p.string());
}

/// "session_<yyyymmdd-hhmmss>_<pid>".
std::string new_session_name() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return "session_" + std::string(stamp) + "_" + std::to_string(::getpid());
}

std::string normalized(const std::string& address) {
  auto p = parse_address(address);
  return p ? p->host + ":" + std::to_string(p->port) : address;
}

} // namespace

session create_session(const std::string& address, const std::string& token) {
  std::error_code ec;
  fs::create_directories(temp_root(), ec);
  session s;
  s.dir = temp_root() / new_session_name();
  fs::create_directories(s.dir / "logs", ec);
  fs::create_directories(s.dir / "pids", ec);
  if (ec) throw exception(error_code::unavailable, "cannot create " + s.dir.string() + ": " + ec.message());
  ::chmod(s.dir.c_str(), 0700);
  s.token = token;
  write_file(s.dir / "token", s.token, 0600);
  write_file(s.dir / "address", normalized(address), 0644);
  const fs::path latest = temp_root() / "session_latest";
  const fs::path tmp = temp_root() / ("session_latest." + std::to_string(::getpid()));
  fs::remove(tmp, ec);
  fs::create_directory_symlink(s.dir.filename(), tmp, ec);
  if (!ec) fs::rename(tmp, latest, ec);
  return s;
}

std::optional<fs::path> find_session(const std::string& address) {
  const std::string want = normalized(address);
  const fs::path latest = temp_root() / "session_latest";
  std::error_code ec;
  if (fs::exists(latest / "address", ec) && read_file(latest / "address") == want) {
    return fs::canonical(latest, ec);
  }
  for (const auto& e : fs::directory_iterator(temp_root(), ec)) {
    if (e.path().filename().string().rfind("session_2", 0) != 0) continue;
    if (fs::exists(e.path() / "address", ec) && read_file(e.path() / "address") == want) {
      return e.path();
    }
  }
  return std::nullopt;
}

expected<std::string> find_token(const std::string& address) {
  if (!knobs().token.empty()) return knobs().token;
  auto dir = find_session(address);
  if (dir) {
    std::error_code ec;
    if (fs::exists(*dir / "token", ec)) {
      std::string t = read_file(*dir / "token");
      if (!t.empty()) return t;
    }
  }
  return error(error_code::unauthenticated,
               "no token for the cluster at " + address + ": set CELER_TOKEN (or --token), "
               "or run on the head's machine where " + (temp_root() / "session_latest/token").string() +
               " holds it");
}

fs::path session_for_joining(const std::string& address) {
  if (auto dir = find_session(address)) return *dir;
  std::error_code ec;
  fs::path dir = temp_root() / new_session_name();
  fs::create_directories(dir / "logs", ec);
  fs::create_directories(dir / "pids", ec);
  write_file(dir / "address", normalized(address), 0644);
  return dir;
}

fs::path write_pid_file(const fs::path& session_dir, const std::string& role) {
  const fs::path p = session_dir / "pids" / (role + "-" + std::to_string(::getpid()) + ".pid");
  write_file(p, std::to_string(::getpid()), 0644);
  return p;
}

std::vector<std::pair<int, fs::path>> recorded_daemons() {
  std::vector<std::pair<int, fs::path>> out;
  std::error_code ec;
  for (const auto& s : fs::directory_iterator(temp_root(), ec)) {
    if (s.path().filename().string().rfind("session_2", 0) != 0) continue;
    for (const auto& p : fs::directory_iterator(s.path() / "pids", ec)) {
      const std::string text = read_file(p.path());
      int pid = 0;
      auto [ptr, perr] = std::from_chars(text.data(), text.data() + text.size(), pid);
      if (perr == std::errc() && pid > 0) out.emplace_back(pid, p.path());
    }
  }
  return out;
}

std::string self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

} // namespace celer::cluster
