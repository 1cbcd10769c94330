#include "core/lineage_ledger.hpp"

#include "config/knobs.hpp"

#include <algorithm>
#include <utility>

namespace celer {

std::string lineage_ledger::admit(std::uint32_t depth, std::size_t bytes) {
  const auto max_depth = static_cast<std::uint32_t>(std::max(1, knobs().lineage_max_depth));
  const auto max_bytes = static_cast<std::size_t>(std::max(0.0, knobs().lineage_max_bytes));
  if (depth > max_depth) {
    return "its lineage is " + std::to_string(depth) + " tasks deep, past lineage_max_depth (" +
           std::to_string(max_depth) + ")";
  }
  if (bytes_ + bytes > max_bytes) {
    return "the lineage this process keeps had reached lineage_max_bytes (" + std::to_string(max_bytes) +
           " bytes) when it finished";
  }
  bytes_ += bytes;
  ++count_;
  return {};
}

void lineage_ledger::drop(std::size_t bytes) noexcept {
  bytes_ -= bytes;
  --count_;
}

void lineage_ledger::queue_rebuild(lineage_rebuild r, std::size_t bytes) {
  drop(bytes);
  ++rebuilt_;
  queued_.push_back(std::move(r));
}

lineage_ledger::batch lineage_ledger::take() {
  batch b;
  b.work.swap(queued_);
  b.to = rebuilder_;
  return b;
}

} // namespace celer
