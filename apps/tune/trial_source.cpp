#include "trial_source.hpp"

namespace celer::tune_app {

std::optional<tune::trial_id> trial_source::next_resumed() {
  if (resumes_.empty()) return std::nullopt;
  const auto id = resumes_.front();
  resumes_.pop_front();
  return id;
}

std::optional<tune::params> trial_source::next_new() {
  if (searcher_done_) return std::nullopt;
  auto suggested = searcher_->suggest();
  if (!suggested) {
    searcher_done_ = true;
    return std::nullopt;
  }
  tune::params p = fixed_;
  for (const auto& [name, v] : *suggested) p.set(name, v);
  return p;
}

} // namespace celer::tune_app
