#pragma once
// What results said of each function, as a core's task submitter learns it: whether its tasks
// may be pipelined (pushed to a leased worker behind others still running there). A
// function's tasks are pipelined only once one has come back quickly (it ran alone on its
// worker and returned within short_task) and none was seen waiting in get. Long tasks so
// spread over workers rather than queue behind one another, and a task that waits in get
// holds up nothing queued behind it.
//
//   function_profiles functions;
//   functions.came_back("f", /*blocked=*/false, /*ran_alone_for=*/std::chrono::microseconds(300));
//   functions.pipelinable("f");  // true: short, never seen waiting
//   functions.saw_blocking("f");
//   functions.pipelinable("f");  // false from now on
//
// Threads: none of its own; its owner's lock guards it (task_submitter::mutex_).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>

namespace celer {

class function_profiles {
public:
  /// A task that came back this soon, alone on its worker, is short enough to queue behind
  /// others: 16 of them (the default depth) hold a worker for tens of milliseconds at most.
  static constexpr auto short_task = std::chrono::milliseconds(2);

  /// Whether tasks of `function` may queue behind others on one worker: known to come back
  /// quickly and never seen waiting. One that waits only sometimes is still safe: its
  /// worker gives back what is queued behind it (task_inbox).
  [[nodiscard]] bool pipelinable(const std::string& function) const;
  /// A task of `function` was seen waiting in get: never pipelined again.
  void saw_blocking(const std::string& function);
  /// A task of `function` came back: `blocked` if it waited in get, `ran_alone_for` how long
  /// it took when it ran alone on its worker (none when others ran there with it: its
  /// turnaround was not its own).
  void came_back(const std::string& function, bool blocked,
                 std::optional<std::chrono::steady_clock::duration> ran_alone_for);

  /// Functions heard of.
  [[nodiscard]] std::size_t size() const noexcept { return records_.size(); }

private:
  struct record {
    bool blocks = false;
    bool short_seen = false;
  };
  std::unordered_map<std::string, record> records_;
};

} // namespace celer
