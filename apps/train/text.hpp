#pragma once
// Numbers as celer-train writes them for people: the console lines, report.html and the
// summaries. Internal to apps/train; no LibTorch.
#include <string>

namespace celer::train_app {

/// `v` with `digits` decimals; "-" for NaN (a figure a run did not record).
[[nodiscard]] std::string fixed(double v, int digits);
/// A byte count as B, KB or MB (decimal); "-" for NaN.
[[nodiscard]] std::string bytes_text(double b);
/// A loss scale: "2^16" for a power of two, else 3 significant digits.
[[nodiscard]] std::string scale_text(double s);

} // namespace celer::train_app
