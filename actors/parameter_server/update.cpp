// The optimiser updates of a parameter server (update.hpp). Each follows LibTorch 1.13's
// C++ optimiser of the same name (torch/csrc/api/src/optim/{sgd,adam,adamw}.cpp), so that a
// run switching from synchronous training (LibTorch's optimiser on every replica) to the
// servers (this code, given that optimiser's state) goes on with the same rule.
#include "update.hpp"

#include <cmath>

namespace celer::parameter_server::detail {

void apply(const optimizer_options& o, optimizer_state& s, std::span<const float> gradient, float scale) {
  const std::size_t n = s.weights.size();
  float* w = s.weights.data();
  float* m = s.first.data();
  const float* g = gradient.data();
  const auto lr = static_cast<float>(o.lr);
  const auto wd = static_cast<float>(o.weight_decay);
  if (o.name == "sgd") {
    const auto mu = static_cast<float>(o.momentum);
    const bool started = s.steps > 0;
    for (std::size_t i = 0; i < n; ++i) {
      float d = g[i] * scale;
      if (wd != 0) d += wd * w[i];
      if (mu != 0) {
        // The first step's buffer is the gradient itself (no dampening), as LibTorch's.
        m[i] = started ? mu * m[i] + d : d;
        d = o.nesterov ? d + mu * m[i] : m[i];
      }
      w[i] -= lr * d;
    }
    ++s.steps;
    return;
  }
  // adam and adamw.
  ++s.steps;
  const double t = static_cast<double>(s.steps);
  const double bias1 = 1 - std::pow(o.beta1, t);
  const double bias2 = 1 - std::pow(o.beta2, t);
  const auto b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
  const auto eps = static_cast<float>(o.eps);
  const auto root_bias2 = static_cast<float>(std::sqrt(bias2));
  const auto step_size = static_cast<float>(o.lr / bias1);
  const bool decoupled = o.name == "adamw";
  float* v = s.second.data();
  for (std::size_t i = 0; i < n; ++i) {
    float d = g[i] * scale;
    if (decoupled) w[i] *= 1 - lr * wd;
    else if (wd != 0) d += wd * w[i];
    m[i] = b1 * m[i] + (1 - b1) * d;
    v[i] = b2 * v[i] + (1 - b2) * d * d;
    const float denom = std::sqrt(v[i]) / root_bias2 + eps;
    w[i] -= step_size * m[i] / denom;
  }
}

} // namespace celer::parameter_server::detail
