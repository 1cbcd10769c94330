#pragma once
/// Lines for the driver's console from code that runs anywhere in the job, as Ray's log
/// monitor brings a task's print() to the driver:
///
///   celer::print("epoch ", epoch, " loss ", loss);   // in a task, an actor or the driver
///
/// In a task or an actor the line reaches the driver's standard output with where it came
/// from, `(train_step pid=4121 node=3f2a9c01) epoch 3 loss 0.41`, and goes to the worker's
/// own log too (logs/worker-<id>.log on a cluster). Alike lines from several workers within
/// a few seconds are printed once, then counted: `... [repeated 7x across cluster]` (digits
/// do not count in "alike", as Ray's dedup). In the driver the line is printed as it is.
/// CELER_LOG_TO_DRIVER=0 keeps lines in the workers' logs; CELER_DEDUP_LOGS=0 prints every
/// line; CELER_LOG_DEDUP_WINDOW_MS sets the window (5000). docs/api.md, "Printing to the
/// driver's console".

#include <sstream>
#include <string>
#include <string_view>

namespace celer {

/// Prints `text` (several lines if it holds newlines) as celer::print does.
void print_line(std::string_view text);

/// Streams `parts` into one line (as std::ostream's << writes each) and prints it.
template <class... Parts>
void print(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  print_line(out.str());
}

} // namespace celer
