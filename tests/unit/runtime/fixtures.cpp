#include "unit/runtime/fixtures.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace celer_test {

std::atomic<bool> release_gate{false};
std::atomic<int> gate_holders{0};

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

std::string thread_names() {
  std::string out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    std::getline(comm, name);
    out += e.path().filename().string() + ":" + name + " ";
  }
  return out;
}

int add(int a, int b) { return a + b; }
int twice(int x) { return 2 * x; }
std::string concat(std::string a, std::string b) { return a + b; }
std::vector<int> reversed(std::vector<int> v) {
  std::reverse(v.begin(), v.end());
  return v;
}
std::map<std::string, int> count_words(std::vector<std::string> words) {
  std::map<std::string, int> out;
  for (const auto& w : words) ++out[w];
  return out;
}
point moved(point p, double dx) {
  p.x += dx;
  return p;
}
celer::bytes flip_bytes(celer::bytes b) {
  for (auto& c : b) c = static_cast<std::uint8_t>(~c);
  return b;
}
int no_args() { return 42; }
void nothing(int) {}
int fail_with(std::string message) { throw std::runtime_error(message); }
int throw_first(std::string dir, int failures) {
  int runs = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++runs;
  std::ofstream(std::filesystem::path(dir) / ("run-" + std::to_string(runs))) << runs;
  if (runs < failures) throw std::runtime_error("run " + std::to_string(runs + 1) + " failed");
  return runs + 1;
}
int sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
int sum_of_squares(int n) {
  std::vector<celer::object_ref<int>> parts;
  for (int i = 1; i <= n; ++i) parts.push_back(celer::task(twice).remote(i));
  int total = 0;
  for (int i = 1; i <= n; ++i) total += celer::get(parts[static_cast<std::size_t>(i - 1)]) / 2 * i;
  return total;
}
int fib(int n) {
  if (n < 2) return n;
  auto a = celer::task(fib).remote(n - 1);
  auto b = celer::task(fib).remote(n - 2);
  return celer::get(a) + celer::get(b);
}
int deref(celer::object_ref<int> r) { return celer::get(r) + 1; }
int use_counter_in_task(int start) {
  auto c = celer::actor(make_counter).remote(start);
  celer::get(c.task(&counter::incr).remote(1));
  return celer::get(c.task(&counter::incr).remote(1));
}
int hold_until_released(int id) {
  ++gate_holders;
  while (!release_gate.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  --gate_holders;
  return id;
}

int counter::add_via_task(int x) { return celer::get(celer::task(add).remote(value, x)); }
counter* make_counter(int start) { return new counter(start); }

int rendezvous::meet(int n) {
  ++inside;
  while (inside.load() < n && !release_gate.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return inside.load();
}
std::unique_ptr<rendezvous> make_rendezvous() { return std::make_unique<rendezvous>(); }
broken* make_broken() { return new broken(); }

CELER_REMOTE(add, twice, concat, reversed, count_words, moved, flip_bytes, no_args, nothing,
             fail_with, sleep_ms, sum_of_squares, fib, deref, use_counter_in_task,
             hold_until_released, throw_first);
CELER_REMOTE(make_counter, &counter::incr, &counter::read, &counter::log_call,
             &counter::add_via_task, make_rendezvous, &rendezvous::meet, make_broken, &broken::f);

} // namespace celer_test
