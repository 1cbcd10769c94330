// A first celer program, built out of tree against an installed celer: a task, an actor,
// get, wait, a remote error and shutdown. Exits non-zero when any result is wrong.
#include <celer/celer.hpp>

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

int add(int a, int b) { return a + b; }
int checked_sqrt(int x) {
  if (x < 0) throw std::domain_error("negative input " + std::to_string(x));
  int r = 0;
  while ((r + 1) * (r + 1) <= x) ++r;
  return r;
}

struct counter {
  explicit counter(int start) : value(start) {}
  int incr(int by) { return value += by; }
  int value;
};
counter* make_counter(int start) { return new counter(start); }

CELER_REMOTE(add, checked_sqrt, make_counter, &counter::incr);

namespace {
int failures = 0;
void expect(bool ok, const std::string& what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << "\n";
  if (!ok) ++failures;
}
} // namespace

int main(int argc, char** argv) {
  celer::init(argc, argv);

  // A task; its result may be passed, unresolved, to another task.
  celer::object_ref<int> three = celer::task(add).remote(1, 2);
  celer::object_ref<int> ten = celer::task(add).remote(three, 7);
  expect(celer::get(ten) == 10, "task: add(add(1, 2), 7) == 10");

  // An actor keeps its state between calls; calls from one caller run in order.
  auto c = celer::actor(make_counter).remote(100);
  std::vector<celer::object_ref<int>> steps;
  for (int i = 1; i <= 4; ++i) steps.push_back(c.task(&counter::incr).remote(i));
  expect(celer::get(steps) == std::vector<int>{101, 103, 106, 110}, "actor: 100 +1 +2 +3 +4");

  // wait: every ref becomes ready.
  std::vector<celer::object_ref<int>> roots;
  for (int x : {1, 4, 9, 16}) roots.push_back(celer::task(checked_sqrt).remote(x));
  auto [ready, pending] = celer::wait(roots, roots.size(), std::chrono::seconds(30));
  expect(ready.size() == 4 && pending.empty(), "wait: 4 of 4 ready");
  expect(celer::get(roots) == std::vector<int>{1, 2, 3, 4}, "get: square roots 1 2 3 4");

  // An exception thrown remotely comes back as celer::task_error.
  try {
    celer::get(celer::task(checked_sqrt).remote(-1));
    expect(false, "remote error: task_error thrown");
  } catch (const celer::task_error& e) {
    expect(e.function() == "checked_sqrt" && e.remote_message() == "negative input -1",
           "remote error: task_error from " + e.function() + ": " + e.remote_message());
  }

  celer::shutdown();
  expect(!celer::is_initialized(), "shutdown");
  std::cout << (failures == 0 ? "consumer: all good\n" : "consumer: FAILED\n");
  return failures == 0 ? 0 : 1;
}
