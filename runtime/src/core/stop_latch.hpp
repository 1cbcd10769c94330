#pragma once
// A core piece's stop: set once, by the first stop, whose reason (and code) stands; what a
// call refused after it is told. The reference table and the task submitter each keep one.
//
//   stop_latch stop;
//   stop.stop("shutdown called");  // true: the first
//   stop.stop("later");            // false: the first reason stands
//   stop.message();                // "celer is shutting down: shutdown called"
//   throw exception(stop.code_or(error_code::failed_precondition), stop.message());
//
// Threads: none of its own; its owner's lock guards it (reference_table::mutex_,
// task_submitter::mutex_).

#include <celer/error.hpp>

#include <optional>
#include <string>

namespace celer {

class stop_latch {
public:
  /// Stops, the first time: true then. A later stop changes nothing (its reason and code
  /// are dropped).
  bool stop(const std::string& reason, std::optional<error_code> code = std::nullopt);
  [[nodiscard]] bool stopped() const noexcept { return stopped_; }
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }
  /// What a call refused after the stop is told: the reason as given when the stop came
  /// with a code (its own message, e.g. the job's end), else that celer is shutting down.
  [[nodiscard]] std::string message() const;
  /// The stop's code, or `otherwise` when it came without one.
  [[nodiscard]] error_code code_or(error_code otherwise) const noexcept { return code_.value_or(otherwise); }

private:
  bool stopped_ = false;
  std::string reason_;
  std::optional<error_code> code_;
};

} // namespace celer
