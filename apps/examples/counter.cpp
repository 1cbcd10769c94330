// A counter actor: state that lives between calls, found again by name.
#include "report_errors.hpp"

#include <celer/celer.hpp>

#include <iostream>
#include <string>

struct counter {
  explicit counter(int start) : value(start) {}
  int incr(int by) { return value += by; }
  int read() const { return value; }
  int value;
};

counter* make_counter(int start) { return new counter(start); }

/// A task that uses the named actor too: actors are reachable from anywhere in the job.
int bump_named(std::string name, int by) {
  auto c = celer::get_actor<counter>(name);
  return celer::get(c.task(&counter::incr).remote(by));
}

CELER_REMOTE(make_counter, &counter::incr, &counter::read, bump_named);

int main(int argc, char** argv) {
  return report_errors([&] {
    celer::init(argc, argv);
    auto c = celer::actor(make_counter).options({.name = "hits"}).remote(10);

    // Calls from one caller run in order, one at a time.
    std::vector<celer::object_ref<int>> steps;
    for (int i = 1; i <= 5; ++i) steps.push_back(c.task(&counter::incr).remote(i));
    for (int v : celer::get(steps)) std::cout << v << " ";
    std::cout << "\n";

    int after_task = celer::get(celer::task(bump_named).remote(std::string("hits"), 100));
    std::cout << "after a task bumped it by name: " << after_task << "\n";
    std::cout << "read: " << celer::get(c.task(&counter::read).remote()) << "\n";

    celer::kill(c);
    celer::shutdown();
    return after_task == 125 ? 0 : 1;
  });
}
