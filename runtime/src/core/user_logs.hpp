#pragma once
// Lines user code prints with celer::print (Ray's log monitor, and its dedup), in two pieces:
//
// - log_dedup, pure policy on a clock the caller gives: a line another worker printed alike
//   (digits aside) within the window is counted instead of printed, and once the window
//   ends the count is printed with the last of them, "[repeated 3x across cluster]". A
//   worker's own lines are never folded while it is the only one printing them.
// - user_logs, the core's: in a driver it prints what comes (user_log from the head, or
//   from an embedded worker thread) to its standard output through log_dedup; in a worker
//   process it writes a line to the worker's own log and sends it to the head for the
//   driver, at most lines_per_second a second (the rest stay in the worker's log, and the
//   driver is told how many).
//
//   log_dedup d({.window = 5s});
//   if (auto out = d.add(line, now)) print(*out);
//   for (auto& s : d.expire(now)) print(s);      // on each tick; expire(now, true) at the end
//
// Threads: user_logs is called from any thread (prints, the core's handler, its ticks) and
// holds its own mutex, taken after no other lock and held only around its state and the
// write to standard output.

#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace celer {

class log_dedup {
public:
  using time_point = std::chrono::steady_clock::time_point;
  struct config {
    /// Off: every line is printed.
    bool dedup = true;
    std::chrono::milliseconds window{5000};
  };
  /// Lines kept for folding at once; past it the oldest window is closed early.
  static constexpr std::size_t max_kept = 10000;

  explicit log_dedup(config cfg) : cfg_(cfg) {}

  /// What to print for `line` at `now` (with its prefix), or nullopt when it is folded.
  [[nodiscard]] std::optional<std::string> add(const protocol::log_line& line, time_point now);
  /// The counts of folded lines whose window ended by `now` (every window with `all`).
  [[nodiscard]] std::vector<std::string> expire(time_point now, bool all = false);

  /// The line without its digits and without spaces at either end: lines alike but for
  /// numbers (a step, a loss) fold together.
  [[nodiscard]] static std::string canonical(std::string_view text);
  /// "(fn pid=12 node=3f2a9c01) " or "(fn actor=ab12cd34 pid=12 node=3f2a9c01) ".
  [[nodiscard]] static std::string prefix(const protocol::log_line& line);

private:
  struct seen {
    time_point first;
    worker_id source;
    bool several = false;  // another worker printed it alike within the window
    std::size_t folded = 0;
    protocol::log_line last;
  };
  config cfg_;
  std::unordered_map<std::string, seen> seen_;
};

class user_logs {
public:
  using clock = std::function<std::chrono::steady_clock::time_point()>;
  /// Where printed text goes (standard output, flushed, by default).
  using sink = std::function<void(const std::string&)>;
  /// Lines a worker process sends the driver per second; the rest stay in its own log.
  static constexpr std::size_t lines_per_second = 1000;

  explicit user_logs(clock now = [] { return std::chrono::steady_clock::now(); });

  /// A driver's: lines from its workers (the head passes them on, or an embedded worker
  /// thread's print). Dropped with log_to_driver = 0.
  void show(std::vector<protocol::log_line> lines);
  /// A driver's tick (and its stop, with `all`): the counts of folded lines now due.
  void tick(bool all = false);
  /// A worker process's print: to its own standard error (its log file), and to `head` as
  /// user_log of `job`, within lines_per_second.
  void send(transport& net, const address& head, const job_id& job, protocol::log_line line);
  /// Text printed by the driver itself (no prefix, never folded).
  void print_plain(const std::string& text);

  /// Tests: where text goes instead of standard output.
  void print_to(sink s);

private:
  void write(const std::string& text);  // requires mutex_
  clock now_;
  std::mutex mutex_;
  std::optional<log_dedup> dedup_;  // made on first use, from the knobs then
  sink sink_;
  // A worker's budget: lines sent in the current second, and those kept back.
  std::chrono::steady_clock::time_point second_{};
  std::size_t sent_ = 0;
  std::size_t held_back_ = 0;
};

} // namespace celer
