#include "core/task_descriptor.hpp"

#include <algorithm>
#include <utility>

namespace celer {

protocol::task_spec task_descriptor::spec_for(const task_id& id, std::vector<protocol::task_arg> args,
                                              std::int32_t attempt) const {
  protocol::task_spec spec = prototype;
  spec.id = id;
  spec.args = std::move(args);
  spec.attempt = attempt;
  return spec;
}

std::shared_ptr<const task_descriptor> task_descriptors::intern(protocol::task_spec spec,
                                                                const exceptions_to_retry& retry_exceptions) {
  spec.id = {};
  spec.args.clear();
  spec.args.shrink_to_fit();
  spec.attempt = 1;
  const auto same = [&](const task_descriptor& d) {
    return d.retry_exceptions == retry_exceptions && d.prototype == spec;
  };
  if (last_ != nullptr && same(*last_)) return last_;
  auto& known = by_function_[spec.function];
  for (const auto& weak : known) {
    if (auto d = weak.lock(); d != nullptr && same(*d)) {
      last_ = d;
      return d;
    }
  }
  auto made = std::make_shared<const task_descriptor>(task_descriptor{std::move(spec), retry_exceptions});
  known.push_back(made);
  last_ = made;
  if (++count_ >= prune_at_) prune();
  return made;
}

void task_descriptors::prune() {
  count_ = 0;
  for (auto it = by_function_.begin(); it != by_function_.end();) {
    std::erase_if(it->second, [](const auto& weak) { return weak.expired(); });
    count_ += it->second.size();
    it = it->second.empty() ? by_function_.erase(it) : std::next(it);
  }
  prune_at_ = std::max<std::size_t>(64, 2 * count_);
}

} // namespace celer
