#pragma once
// group::allreduce_sign (<celer/actors/collective.hpp>): a 1-bit allreduce with error
// feedback, on messages sent straight between members (an all-to-all, then an allgather).
// Runs on the thread of the member that calls the group.

#include "ring.hpp"

#include <celer/actors/trainer/compression.hpp>

#include <optional>
#include <vector>

namespace celer::collective {

struct sign_feedback::state {
  std::size_t size = 0, block_size = 0;
  int members = 0, rank = -1;
  /// This member's compressor for each part of its values (part p goes to member p).
  std::vector<trainer::sign_compressor> mine;
  /// The compressor of the average of the part this member owns.
  std::optional<trainer::sign_compressor> owned;
};

namespace detail {

/// The algorithm of group::allreduce_sign, in operation `state.operations` (begun).
expected<void> sign_allreduce(member_state& state, std::span<float> data, sign_feedback::state& feedback,
                              std::size_t block_size);

} // namespace detail
} // namespace celer::collective
