// The driver programs of tests/cluster/head_restart_test.sh: one keeps calling a named
// actor (and asking the head for it) while the head is killed and started again; a second
// finds the actor by its name afterwards and runs a new task.
//
//   celer-head-restart-driver serve NAME STOP_FILE   (CELER_ADDRESS set)
//     creates the counter actor NAME, prints "ready <actor id>", then until STOP_FILE exists: every
//     50 ms "call <value> <unix ms>" for a call of the actor (or "call failed <unix ms>:
//     <why>"), and, from a thread of its own, every 100 ms "lookup ok <unix ms>" when the
//     head found the actor by its name (or "lookup failed <unix ms>: <why>"). Exits 0.
//   celer-head-restart-driver find NAME
//     prints "found <actor id>" (the actor named NAME) and "task <2 + 3>" (a new task of
//     this second job); exits 1 with "failed: <why>" otherwise.
//   celer-head-restart-driver tasks          (tests/cluster/driver_declared_dead_test.sh)
//     prints "ready" once a task ran, then every 100 ms runs a task and prints "task ok
//     <unix ms>" or "task failed <unix ms>: <why>"; exits 3 after a failure saying the head
//     ended the job, 4 if none came within 120 s.
#include <celer/celer.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

struct counter {
  explicit counter(int start) : value(start) {}
  int incr(int by) { return value += by; }
  int value;
};

counter* make_counter(int start) { return new counter(start); }
int add(int a, int b) { return a + b; }

CELER_REMOTE(make_counter, &counter::incr, add);

namespace {

long long unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string one_line(std::string s) {
  for (auto& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

int serve(const std::string& name, const std::filesystem::path& stop) {
  auto actor = celer::actor(make_counter).options({.name = name}).remote(0);
  (void)celer::get(actor.task(&counter::incr).remote(0), std::chrono::seconds(60));
  std::cout << "ready " << actor.id().hex() << std::endl;
  std::mutex out;
  // Lookups wait for the head; the calls, which go straight to the actor's worker, do not
  // wait for them (a thread each).
  std::thread lookups([&] {
    while (!std::filesystem::exists(stop)) {
      std::string line;
      try {
        auto found = celer::get_actor<counter>(name);
        line = (found.id() == actor.id() ? "lookup ok " : "lookup wrong ") + std::to_string(unix_ms());
      } catch (const std::exception& e) {
        line = "lookup failed " + std::to_string(unix_ms()) + ": " + one_line(e.what());
      }
      {
        std::lock_guard lock(out);
        std::cout << line << std::endl;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  while (!std::filesystem::exists(stop)) {
    std::string line;
    try {
      const int v = celer::get(actor.task(&counter::incr).remote(1), std::chrono::seconds(30));
      line = "call " + std::to_string(v) + " " + std::to_string(unix_ms());
    } catch (const std::exception& e) {
      line = "call failed " + std::to_string(unix_ms()) + ": " + one_line(e.what());
    }
    {
      std::lock_guard lock(out);
      std::cout << line << std::endl;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  lookups.join();
  return 0;
}

int find(const std::string& name) {
  try {
    // Found, not called: an actor's worker admits its own job only (docs/security.md).
    std::cout << "found " << celer::get_actor<counter>(name).id().hex() << std::endl;
    std::cout << "task " << celer::get(celer::task(add).remote(2, 3), std::chrono::seconds(30))
              << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cout << "failed: " << one_line(e.what()) << std::endl;
    return 1;
  }
}

int tasks() {
  (void)celer::get(celer::task(add).remote(2, 3), std::chrono::seconds(60));
  std::cout << "ready" << std::endl;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < until) {
    try {
      (void)celer::get(celer::task(add).remote(2, 3), std::chrono::seconds(5));
      std::cout << "task ok " << unix_ms() << std::endl;
    } catch (const std::exception& e) {
      const std::string why = one_line(e.what());
      std::cout << "task failed " << unix_ms() << ": " << why << std::endl;
      if (why.find("the head ended job") != std::string::npos) return 3;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 4;
}

} // namespace

int main(int argc, char** argv) {
  celer::init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  int code = 2;
  if (mode == "serve" && argc > 3) {
    code = serve(argv[2], argv[3]);
  } else if (mode == "find" && argc > 2) {
    code = find(argv[2]);
  } else if (mode == "tasks") {
    code = tasks();
  } else {
    std::cerr << "usage: celer-head-restart-driver serve NAME STOP_FILE | find NAME | tasks\n";
  }
  celer::shutdown();
  return code;
}
