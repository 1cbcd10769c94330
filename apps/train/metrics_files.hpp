#pragma once
// celer-train's metrics files (the driver's): each step's figures as a line of
// <output>/metrics.jsonl and as scalars of a TensorBoard event file in <output>/tensorboard/,
// written together, the step's mode ("sync", "async") as a text field of the line. Internal
// to apps/train; no LibTorch.
//
//   auto files = metrics_files::open(dir, /*append=*/resume);   // expected<metrics_files>
//   if (auto ok = files->write(step, "sync", figures); !ok) ...
//   files->close();
#include <celer/actors/trainer/metrics_log.hpp>
#include <celer/error.hpp>

#include <cstdint>
#include <span>
#include <string>

namespace celer::train_app {

class metrics_files {
public:
  /// Opens the event file (in a new file of <dir>/tensorboard) and <dir>/metrics.jsonl,
  /// appended to when `append` (a resumed run); the writer's error when either cannot be.
  [[nodiscard]] static expected<metrics_files> open(const std::string& dir, bool append);

  /// The step's figures into both files.
  [[nodiscard]] expected<void> write(std::int64_t step, const char* mode, std::span<const trainer::scalar> figures);
  /// Writes what is buffered and closes both files; an error is dropped (the run's summary
  /// follows, and the lines already flushed stand).
  void close();

private:
  metrics_files(trainer::event_file_writer events, trainer::jsonl_writer lines)
    : events_(std::move(events)), lines_(std::move(lines)) {}

  trainer::event_file_writer events_;
  trainer::jsonl_writer lines_;
};

} // namespace celer::train_app
