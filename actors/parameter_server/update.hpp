#pragma once
// The optimiser updates a parameter server applies to its shard (parameter_server.hpp): LibTorch's
// SGD (momentum, Nesterov, L2), Adam (L2) and AdamW (decoupled decay), element by element in
// float32. Pure code, no runtime: the server calls it under its lock, the tests directly.
#include <celer/actors/parameter_server.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace celer::parameter_server::detail {

/// A shard's weights and optimiser state.
struct optimizer_state {
  std::vector<float> weights;
  /// sgd: the momentum buffer; adam/adamw: exp_avg.
  std::vector<float> first;
  /// adam/adamw: exp_avg_sq.
  std::vector<float> second;
  /// Steps applied (adam's bias correction; sgd: whether the momentum buffer started).
  std::int64_t steps = 0;
};

/// One optimiser step on gradient × `scale` (the servers pass 1/n to apply a mean).
/// `gradient` has weights.size() floats; `o` was validated.
void apply(const optimizer_options& o, optimizer_state& s, std::span<const float> gradient, float scale);

} // namespace celer::parameter_server::detail
