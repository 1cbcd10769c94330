#include "core/function_profiles.hpp"

namespace celer {

bool function_profiles::pipelinable(const std::string& function) const {
  auto it = records_.find(function);
  return it != records_.end() && it->second.short_seen && !it->second.blocks;
}

void function_profiles::saw_blocking(const std::string& function) { records_[function].blocks = true; }

void function_profiles::came_back(const std::string& function, bool blocked,
                                  std::optional<std::chrono::steady_clock::duration> ran_alone_for) {
  auto& r = records_[function];
  if (blocked) r.blocks = true;
  if (ran_alone_for && *ran_alone_for <= short_task) r.short_seen = true;
}

} // namespace celer
