#include "metrics_files.hpp"

namespace celer::train_app {

expected<metrics_files> metrics_files::open(const std::string& dir, bool append) {
  auto events = trainer::event_file_writer::open({.dir = dir + "/tensorboard"});
  if (!events) return events.error();
  auto lines = trainer::jsonl_writer::open({.path = dir + "/metrics.jsonl", .append = append});
  if (!lines) return lines.error();
  return metrics_files(std::move(*events), std::move(*lines));
}

expected<void> metrics_files::write(std::int64_t step, const char* mode, std::span<const trainer::scalar> figures) {
  if (auto ok = events_.add_scalars(step, figures); !ok) return ok;
  const trainer::text_field texts[] = {{"mode", mode}};
  return lines_.write(step, texts, figures);
}

void metrics_files::close() {
  (void)events_.close();
  (void)lines_.close();
}

} // namespace celer::train_app
