// The victim (and the attacker's own driver) of tests/security/attacker_suite.py: a real
// driver that makes things of its own job — a named actor, a placement group and objects —
// and stays alive, answering commands on standard input, so that the suite can check that
// nothing another job sent changed them.
//
//   celer-security-victim NAME      (CELER_ADDRESS set; NAME names the actor and the group)
//
// It prints one line once everything exists:
//   ready actor=<hex> group=<hex> object=<hex> stored=<hex> value=7
// then, for each line it reads:
//   check -> "check actor=<n> object=<sum> stored=<sum> group=<created|pending|...>" where
//            n counts up from 8 (each check adds one), or "check failed: <why>"
//   where NODE -> "where <node hex>": runs a task that must run on node NODE (32 hex digits)
//            and says where it ran, or "where failed: <why>"
//   probe PATH -> "probe <what>": a task of this job opens PATH for reading on a worker and
//            says "opened" or the error (a worker's sandbox, docs/security.md)
//   signal PID -> "signal <what>": a task of this job sends signal 0 to PID: "sent" or the error
//   quit  -> shuts down and exits 0
#include <celer/celer.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iostream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

struct counter {
  explicit counter(int start) : value(start) {}
  int incr(int by) { return value += by; }
  int value;
};

counter* make_counter(int start) { return new counter(start); }

/// Where a task runs: the node's id.
std::string where_am_i() { return celer::current_node_id().hex(); }

/// What a worker of this job may do on its machine: open `path` for reading.
std::string probe_open(std::string path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  return "opened";
}

/// ... and send signal 0 to `pid`.
std::string probe_signal(int pid) { return ::kill(pid, 0) == 0 ? "sent" : std::strerror(errno); }

CELER_REMOTE(make_counter, &counter::incr, where_am_i, probe_open, probe_signal);

namespace {

std::uint64_t sum_of(const std::vector<std::uint8_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::uint64_t{0});
}

std::string group_state(const celer::placement_group& pg) {
  for (const auto& g : celer::list_placement_groups()) {
    if (g.id == pg.id()) return g.state;
  }
  return "missing";
}

} // namespace

int main(int argc, char** argv) {
  celer::init(argc, argv);
  const std::string name = argc > 1 ? argv[1] : "victim";
  auto actor = celer::actor(make_counter).options({.name = name + "-counter"}).remote(7);
  // Custom resources only, so the group takes no CPU from the work the suite runs.
  auto pg = celer::create_placement_group(
    {.bundles = {{.resources = {{"victim_slot", 1}}}}, .name = name + "-group"});
  // A small object (inline at its owner) and a large one (in the node's object store).
  std::vector<std::uint8_t> small(1000), large(4 << 20);
  for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<std::uint8_t>(i * 7);
  // Job K's ("victim") large object differs from every other job's, so that the suite can
  // search memory for it (section H): bytes i * 13 + 1 for K, i * 29 + 1 for the others.
  const unsigned step = name == "victim" ? 13 : 29;
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<std::uint8_t>(i * step + 1);
  auto inline_ref = celer::put(small);
  auto stored_ref = celer::put(large);
  int first = 0;
  try {
    first = celer::get(actor.task(&counter::incr).remote(0), std::chrono::seconds(60));
    if (!pg.ready(std::chrono::seconds(60))) {
      std::cout << "not ready: the placement group was not created" << std::endl;
      return 1;
    }
  } catch (const std::exception& e) {
    std::cout << "not ready: " << e.what() << std::endl;
    return 1;
  }
  std::cout << "ready actor=" << actor.id().hex() << " group=" << pg.id().hex()
            << " object=" << inline_ref.id().hex() << " stored=" << stored_ref.id().hex()
            << " value=" << first << " object_sum=" << sum_of(small)
            << " stored_sum=" << sum_of(large) << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "quit") break;
    if (line.rfind("where ", 0) == 0) {
      try {
        auto node = celer::node_id::parse(line.substr(6));
        if (!node) throw std::invalid_argument("not a node id: " + line.substr(6));
        auto ran = celer::task(where_am_i)
                     .options({.scheduling = celer::scheduling_strategy::node_affinity(*node)})
                     .remote();
        std::cout << "where " << celer::get(ran, std::chrono::seconds(30)) << std::endl;
      } catch (const std::exception& e) {
        std::string why = e.what();
        for (auto& c : why) if (c == '\n') c = ' ';
        std::cout << "where failed: " << why << std::endl;
      }
      continue;
    }
    if (line.rfind("probe ", 0) == 0 || line.rfind("signal ", 0) == 0) {
      const bool open = line[0] == 'p';
      try {
        auto r = open ? celer::task(probe_open).remote(line.substr(6))
                      : celer::task(probe_signal).remote(std::stoi(line.substr(7)));
        std::cout << (open ? "probe " : "signal ") << celer::get(r, std::chrono::seconds(30)) << std::endl;
      } catch (const std::exception& e) {
        std::string why = e.what();
        for (auto& c : why) if (c == '\n') c = ' ';
        std::cout << (open ? "probe" : "signal") << " failed: " << why << std::endl;
      }
      continue;
    }
    if (line != "check") continue;
    try {
      const int v = celer::get(actor.task(&counter::incr).remote(1), std::chrono::seconds(20));
      const auto a = celer::get(inline_ref, std::chrono::seconds(20));
      const auto b = celer::get(stored_ref, std::chrono::seconds(20));
      std::cout << "check actor=" << v << " object=" << sum_of(a) << " stored=" << sum_of(b)
                << " group=" << group_state(pg) << std::endl;
    } catch (const std::exception& e) {
      std::string why = e.what();
      for (auto& c : why) if (c == '\n') c = ' ';
      std::cout << "check failed: " << why << std::endl;
    }
  }
  celer::shutdown();
  return 0;
}
