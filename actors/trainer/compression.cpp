// Gradient compression with error feedback (compression.hpp).
#include <celer/actors/trainer/compression.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace celer::trainer {
namespace {

/// Positions travel as uint32 (top-k), and one bound for both compressors keeps them alike.
constexpr std::size_t max_size = std::numeric_limits<std::uint32_t>::max();

constexpr std::size_t ceil_div(std::uint64_t n, std::uint64_t d) noexcept {
  return static_cast<std::size_t>(n / d + (n % d != 0 ? 1 : 0));
}

error invalid(std::string message) { return error(error_code::invalid_argument, std::move(message)); }

template <class Packet>
std::size_t encoded_size(const Packet& p) {
  detail::size_counter counter;
  msgpack::pack(counter, p);
  return counter.size;
}

/// Checks a gradient against a compressor of `size` values with residual `residual`: the
/// same length, and every value of gradient + residual finite (a NaN would stay in the
/// residual forever, and breaks the ordering top-k selects with).
expected<void> check_gradient(std::span<const float> gradient, std::span<const float> residual,
                              const char* what) {
  if (gradient.size() != residual.size()) {
    return invalid(std::string(what) + " was made for gradients of " +
                   std::to_string(residual.size()) + " values, given " +
                   std::to_string(gradient.size()));
  }
  for (std::size_t i = 0; i < gradient.size(); ++i) {
    if (!std::isfinite(gradient[i] + residual[i])) {
      return invalid(std::string(what) + ": gradient value " + std::to_string(i) +
                     (std::isfinite(gradient[i]) ? " plus its residual overflows"
                                                 : " is not finite") +
                     "; skip this step");
    }
  }
  return {};
}

expected<void> check_size(std::size_t size, const char* what) {
  if (size == 0) return invalid(std::string(what) + ": a gradient of 0 values has nothing to send");
  if (size > max_size) {
    return invalid(std::string(what) + ": gradients are limited to " + std::to_string(max_size) +
                   " values, given " + std::to_string(size) + "; compress it in parts");
  }
  return {};
}

} // namespace

std::size_t sign_packet::wire_bytes() const { return encoded_size(*this); }
std::size_t topk_packet::wire_bytes() const { return encoded_size(*this); }

// ---- sign ----

sign_compressor::sign_compressor(std::size_t size, sign_options opts)
  : opts_(opts), residual_(size, 0.0f) {}

expected<sign_compressor> sign_compressor::make(std::size_t size, sign_options opts) {
  if (auto ok = check_size(size, "sign_compressor"); !ok) return ok.error();
  if (opts.block_size == 0) return invalid("sign_compressor: block_size must be at least 1");
  if (opts.block_size > max_size) {
    return invalid("sign_compressor: block_size must be below 2^32, given " +
                   std::to_string(opts.block_size));
  }
  return sign_compressor(size, opts);
}

/// Copies a saved residual in, when its size fits.
static expected<void> restore_residual(std::span<const float> from, std::vector<float>& into, const char* who) {
  if (from.size() != into.size()) {
    return error(error_code::invalid_argument, std::string(who) + ": a residual of " + std::to_string(from.size()) +
                                                 " values for gradients of " + std::to_string(into.size()));
  }
  std::copy(from.begin(), from.end(), into.begin());
  return {};
}

void sign_compressor::reset() noexcept { std::fill(residual_.begin(), residual_.end(), 0.0f); }

expected<void> sign_compressor::restore(std::span<const float> residual) {
  return restore_residual(residual, residual_, "sign_compressor");
}

expected<sign_packet> sign_compressor::compress(std::span<const float> gradient) {
  if (auto ok = check_gradient(gradient, residual_, "sign_compressor"); !ok) return ok.error();
  const std::size_t n = residual_.size();
  const std::size_t block = opts_.block_size;
  sign_packet p;
  p.size = n;
  p.block_size = static_cast<std::uint32_t>(block);
  p.signs = celer::bytes(ceil_div(n, 8));  // zeroed
  p.scales = celer::array<float>(ceil_div(n, block));
  std::uint8_t* signs = p.signs.data();
  float* scales = p.scales.data();
  float* r = residual_.data();
  for (std::size_t lo = 0, b = 0; lo < n; lo += block, ++b) {
    const std::size_t hi = std::min(n, lo + block);
    // The mean |v| minimises sum (|v_i| - c)^2, the error of sending c * sign(v).
    double sum = 0;
    for (std::size_t i = lo; i < hi; ++i) sum += std::fabs(gradient[i] + r[i]);
    const auto scale = static_cast<float>(sum / static_cast<double>(hi - lo));
    scales[b] = scale;
    for (std::size_t i = lo; i < hi; ++i) {
      const float v = gradient[i] + r[i];
      const bool negative = v < 0.0f;  // 0 is sent as +scale; its error stays in r
      if (negative) signs[i >> 3] = static_cast<std::uint8_t>(signs[i >> 3] | (1u << (i & 7)));
      if (opts_.error_feedback) r[i] = v - (negative ? -scale : scale);
    }
  }
  return p;
}

// ---- top-k ----

topk_compressor::topk_compressor(std::size_t size, topk_options opts)
  : opts_(opts), residual_(size, 0.0f) {}

expected<topk_compressor> topk_compressor::make(std::size_t size, topk_options opts) {
  if (auto ok = check_size(size, "topk_compressor"); !ok) return ok.error();
  if (opts.k == 0) return invalid("topk_compressor: k must be at least 1");
  if (opts.k > size) {
    return invalid("topk_compressor: k = " + std::to_string(opts.k) +
                   " is larger than the gradient's " + std::to_string(size) + " values");
  }
  return topk_compressor(size, opts);
}

void topk_compressor::reset() noexcept { std::fill(residual_.begin(), residual_.end(), 0.0f); }

expected<void> topk_compressor::restore(std::span<const float> residual) {
  return restore_residual(residual, residual_, "topk_compressor");
}

expected<topk_packet> topk_compressor::compress(std::span<const float> gradient) {
  if (auto ok = check_gradient(gradient, residual_, "topk_compressor"); !ok) return ok.error();
  const std::size_t n = residual_.size();
  const std::size_t k = opts_.k;
  // v: the residual itself with error feedback (it becomes the next residual once the
  // sent entries are cleared); the bare gradient without (its residual is always zero).
  const float* v = gradient.data();
  if (opts_.error_feedback) {
    for (std::size_t i = 0; i < n; ++i) residual_[i] += gradient[i];
    v = residual_.data();
  }
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), std::uint32_t{0});
  if (k < n) {
    // A strict total order (magnitude, then position), so the chosen set is the same on
    // every machine whatever nth_element's algorithm.
    const auto larger = [v](std::uint32_t a, std::uint32_t b) {
      const float fa = std::fabs(v[a]);
      const float fb = std::fabs(v[b]);
      return fa > fb || (fa == fb && a < b);
    };
    std::nth_element(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k),
                     order_.end(), larger);
    std::sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k));
  }
  topk_packet p;
  p.size = n;
  p.indices = celer::array<std::uint32_t>(order_.data(), k);
  p.values = celer::array<float>(k);
  float* values = p.values.data();
  for (std::size_t j = 0; j < k; ++j) {
    values[j] = v[order_[j]];
    if (opts_.error_feedback) residual_[order_[j]] = 0.0f;
  }
  return p;
}

// ---- the receiver's side ----

expected<void> validate(const sign_packet& p) {
  if (p.size == 0) return invalid("sign packet: it holds no values");
  if (p.block_size == 0) return invalid("sign packet: block_size is 0");
  const std::size_t want_signs = ceil_div(p.size, 8);
  if (p.signs.size() != want_signs) {
    return invalid("sign packet: " + std::to_string(p.size) + " values need " +
                   std::to_string(want_signs) + " sign bytes, it has " +
                   std::to_string(p.signs.size()));
  }
  const std::size_t want_scales = ceil_div(p.size, p.block_size);
  if (p.scales.size() != want_scales) {
    return invalid("sign packet: " + std::to_string(p.size) + " values in blocks of " +
                   std::to_string(p.block_size) + " need " + std::to_string(want_scales) +
                   " scales, it has " + std::to_string(p.scales.size()));
  }
  if (const auto used = static_cast<unsigned>(p.size % 8); used != 0) {
    if ((p.signs[p.signs.size() - 1] >> used) != 0) {
      return invalid("sign packet: bits set past its " + std::to_string(p.size) + " values");
    }
  }
  for (std::size_t b = 0; b < p.scales.size(); ++b) {
    if (!std::isfinite(p.scales[b]) || p.scales[b] < 0.0f) {
      return invalid("sign packet: scale " + std::to_string(b) + " is " +
                     std::to_string(p.scales[b]) + ", not a finite value >= 0");
    }
  }
  return {};
}

expected<void> validate(const topk_packet& p) {
  if (p.size == 0) return invalid("top-k packet: it holds no values");
  if (p.indices.size() != p.values.size()) {
    return invalid("top-k packet: " + std::to_string(p.indices.size()) + " indices but " +
                   std::to_string(p.values.size()) + " values");
  }
  if (p.indices.size() > p.size) {
    return invalid("top-k packet: " + std::to_string(p.indices.size()) + " entries of " +
                   std::to_string(p.size) + " values");
  }
  for (std::size_t j = 0; j < p.indices.size(); ++j) {
    if (p.indices[j] >= p.size) {
      return invalid("top-k packet: index " + std::to_string(p.indices[j]) + " is past its " +
                     std::to_string(p.size) + " values");
    }
    if (j > 0 && p.indices[j] <= p.indices[j - 1]) {
      return invalid("top-k packet: indices do not increase at entry " + std::to_string(j));
    }
    if (!std::isfinite(p.values[j])) {
      return invalid("top-k packet: the value at index " + std::to_string(p.indices[j]) +
                     " is not finite");
    }
  }
  return {};
}

namespace {

template <class Packet>
expected<void> check_receiver(const Packet& p, std::size_t out_size, const char* what) {
  if (auto ok = validate(p); !ok) return ok;
  if (p.size != out_size) {
    return invalid(std::string(what) + ": the packet holds " + std::to_string(p.size) +
                   " values, the buffer " + std::to_string(out_size));
  }
  return {};
}

/// out[i] = op(out[i], decoded value i) for every i.
template <class Op>
void for_each_sign(const sign_packet& p, std::span<float> out, Op op) {
  const std::uint8_t* signs = p.signs.data();
  const float* scales = p.scales.data();
  const std::size_t block = p.block_size;
  for (std::size_t lo = 0, b = 0; lo < out.size(); lo += block, ++b) {
    const std::size_t hi = std::min(out.size(), lo + block);
    const float scale = scales[b];
    for (std::size_t i = lo; i < hi; ++i) {
      const bool negative = ((signs[i >> 3] >> (i & 7)) & 1u) != 0;
      out[i] = op(out[i], negative ? -scale : scale);
    }
  }
}

} // namespace

expected<void> decompress(const sign_packet& p, std::span<float> out) {
  if (auto ok = check_receiver(p, out.size(), "decompress"); !ok) return ok;
  for_each_sign(p, out, [](float, float x) { return x; });
  return {};
}

expected<void> accumulate_into(const sign_packet& p, std::span<float> sum, float weight) {
  if (auto ok = check_receiver(p, sum.size(), "accumulate_into"); !ok) return ok;
  for_each_sign(p, sum, [weight](float s, float x) { return s + weight * x; });
  return {};
}

expected<void> decompress(const topk_packet& p, std::span<float> out) {
  if (auto ok = check_receiver(p, out.size(), "decompress"); !ok) return ok;
  std::fill(out.begin(), out.end(), 0.0f);
  for (std::size_t j = 0; j < p.indices.size(); ++j) out[p.indices[j]] = p.values[j];
  return {};
}

expected<void> accumulate_into(const topk_packet& p, std::span<float> sum, float weight) {
  if (auto ok = check_receiver(p, sum.size(), "accumulate_into"); !ok) return ok;
  for (std::size_t j = 0; j < p.indices.size(); ++j) sum[p.indices[j]] += weight * p.values[j];
  return {};
}

} // namespace celer::trainer
