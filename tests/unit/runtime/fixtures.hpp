#pragma once
// Shared pieces of the runtime tests: a scoped embedded runtime and the remote functions
// the tests call.

#include <celer/celer.hpp>

#include <atomic>
#include <map>
#include <string>
#include <vector>

namespace celer_test {

/// Starts celer for one test case and shuts it down after, even when the test fails.
struct scoped_runtime {
  explicit scoped_runtime(celer::init_options options = {.num_cpus = 2}) { celer::init(options); }
  ~scoped_runtime() { celer::shutdown(); }
  scoped_runtime(const scoped_runtime&) = delete;
  scoped_runtime& operator=(const scoped_runtime&) = delete;
};

/// Threads of this process, from /proc/self/task.
int thread_count();
/// "tid:name" of every thread of this process, for failure messages.
std::string thread_names();

struct point {
  double x = 0, y = 0;
  std::string label;
  MSGPACK_DEFINE(x, y, label)
  friend bool operator==(const point&, const point&) = default;
};

int add(int a, int b);
int twice(int x);
std::string concat(std::string a, std::string b);
std::vector<int> reversed(std::vector<int> v);
std::map<std::string, int> count_words(std::vector<std::string> words);
point moved(point p, double dx);
celer::bytes flip_bytes(celer::bytes b);
int no_args();
void nothing(int);
int fail_with(std::string message);
/// Leaves a marker in `dir` for each run and throws on the first `failures` runs; then
/// returns which run it was.
int throw_first(std::string dir, int failures);
int sleep_ms(int ms);
int sum_of_squares(int n);
int fib(int n);
int deref(celer::object_ref<int> r);
int use_counter_in_task(int start);
/// Spins (without get) until `release_gate` is set; holds its CPUs meanwhile.
int hold_until_released(int id);
extern std::atomic<bool> release_gate;
extern std::atomic<int> gate_holders;

/// Closes release_gate for one test and opens it when the test ends, even by a failed
/// REQUIRE, so that shutdown never waits on a task spinning at a closed gate. Declare it
/// after the scoped_runtime so that it opens first.
struct closed_gate {
  closed_gate() { release_gate = false; }
  ~closed_gate() { release_gate = true; }
  closed_gate(const closed_gate&) = delete;
  closed_gate& operator=(const closed_gate&) = delete;
};

struct counter {
  explicit counter(int start) : value(start) {}
  int incr(int by) { return value += by; }
  int read() const { return value; }
  std::vector<int> log_call(int i) {
    calls.push_back(i);
    return calls;
  }
  int add_via_task(int x);
  int value;
  std::vector<int> calls;
};
counter* make_counter(int start);

struct rendezvous {
  /// Blocks until `n` calls are inside at once (only possible with max_concurrency >= n)
  /// or release_gate is set; returns how many calls have entered.
  int meet(int n);
  std::atomic<int> inside{0};
};
std::unique_ptr<rendezvous> make_rendezvous();

struct broken {
  broken() { throw std::runtime_error("constructor exploded"); }
  int f() { return 1; }
};
broken* make_broken();

} // namespace celer_test
