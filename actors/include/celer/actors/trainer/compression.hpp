#pragma once
/// Gradient compression with error feedback, for trainers that send gradients to their
/// peers (allreduce) or to parameter servers: 1-bit sign compression (1-bit SGD, Seide et
/// al. 2014; scaled signSGD with error feedback, Karimireddy et al. 2019) and top-k.
///
///   namespace tr = celer::trainer;
///   auto sign = tr::sign_compressor::make(num_params, {.block_size = 1024});
///   if (!sign) { std::cerr << sign.error().to_string() << "\n"; return 1; }
///   // each step, on each worker: the flat gradient (all parameters, in a fixed order)
///   auto packet = sign->compress(std::span<const float>(grad.data(), grad.size()));
///   if (!packet) { ...skip the step: a gradient was not finite... }
///   bytes_sent += packet->wire_bytes();        // ~n/8: 31x fewer than n floats
///   // ...send *packet (a celer value), and on the receiving side:
///   std::vector<float> sum(num_params, 0.0f);
///   for (const auto& p : packets) (void)tr::accumulate_into(p, sum, /*weight=*/1.0f / n_workers);
///
/// Error feedback: a compressor keeps a residual, the part of earlier gradients it has not
/// sent yet. Each step it compresses v = gradient + residual and keeps v minus what it
/// sent as the next residual, so over T steps what was sent adds up to the sum of the true
/// gradients minus one residual: nothing is lost, only delayed. Without error feedback
/// sign compression is biased (it follows the median of a skewed gradient, not its mean)
/// and can settle away from the optimum.
///
/// Pure computation: no runtime calls, no threads, no LibTorch. A compressor belongs to one
/// owner (the trainer actor); packets are plain values.

#include <celer/codec.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace celer::trainer {

/// The sign-compressed form of n values: one bit per value and one scale per block.
/// Value i decodes to `scales[i / block_size]`, negated when bit i is set. Bit i is bit
/// (i % 8) of `signs[i / 8]` (least significant first); the bits past n in the last byte
/// are zero.
struct sign_packet {
  std::uint64_t size = 0;
  std::uint32_t block_size = 0;
  /// ceil(size / 8) bytes.
  celer::bytes signs;
  /// ceil(size / block_size) scales: each the mean |v| of its block (the scale c that
  /// makes c * sign(v) closest to v in the L2 norm).
  celer::array<float> scales;

  /// The bytes of its msgpack encoding: what travels (the bulk parts as raw bytes, plus
  /// a header of about 20 bytes).
  [[nodiscard]] std::size_t wire_bytes() const;
  MSGPACK_DEFINE(size, block_size, signs, scales)
};

/// The top-k form of n values: the k entries it keeps, every other value is zero.
struct topk_packet {
  std::uint64_t size = 0;
  /// Strictly increasing positions, each below size.
  celer::array<std::uint32_t> indices;
  /// The value at each position of `indices`.
  celer::array<float> values;

  /// The bytes of its msgpack encoding (8 per kept entry plus a header of ~20 bytes).
  [[nodiscard]] std::size_t wire_bytes() const;
  MSGPACK_DEFINE(size, indices, values)
};

/// The bytes of n uncompressed float32 values: what a packet is compared with.
[[nodiscard]] constexpr std::size_t raw_bytes(std::size_t n) noexcept { return n * sizeof(float); }

/// The sign compressor's settings.
struct sign_options {
  /// Values per scale. Each block costs 32 bits of scale besides its 1 bit per value, so a
  /// block of B values takes 1 + 32/B bits a value: 1,024 gives 1.03 bits, 31x fewer
  /// bytes than float32 (256 would give only 28x, 2,048 31.5x). Smaller blocks follow the
  /// gradient's magnitude more closely (layers differ by orders of magnitude, and a block
  /// that straddles two is scaled by their mean); 1,024 is the smallest power of two that
  /// keeps the ratio above 30x. At least 1.
  std::size_t block_size = 1024;
  /// Keep a residual (error feedback). Off: each step compresses the bare gradient and
  /// drops what it could not send (biased; for comparison).
  bool error_feedback = true;
};

/// 1-bit sign compression with error feedback, for gradients of one fixed size.
/// Not thread-safe: one owner.
class sign_compressor {
public:
  /// A compressor for gradients of `size` values (at most 2^32 − 1). invalid_argument
  /// for size 0, a larger size, or block_size 0.
  [[nodiscard]] static expected<sign_compressor> make(std::size_t size, sign_options opts = {});

  /// Compresses v = gradient + residual and keeps v − decode(packet) as the residual.
  /// invalid_argument, with the residual unchanged, when gradient.size() differs from
  /// size() or a value of v is not finite (a NaN or an overflow: skip the step).
  [[nodiscard]] expected<sign_packet> compress(std::span<const float> gradient);

  /// What has not been sent yet (all zeros without error feedback).
  [[nodiscard]] std::span<const float> residual() const noexcept { return residual_; }
  /// Forgets the residual (e.g. after loading weights from a checkpoint or a peer).
  void reset() noexcept;
  /// Sets the residual to one residual() gave (a checkpoint's): invalid_argument, with the
  /// residual unchanged, when the size differs from size().
  [[nodiscard]] expected<void> restore(std::span<const float> residual);
  [[nodiscard]] std::size_t size() const noexcept { return residual_.size(); }
  [[nodiscard]] const sign_options& options() const noexcept { return opts_; }

private:
  sign_compressor(std::size_t size, sign_options opts);
  sign_options opts_;
  std::vector<float> residual_;
};

/// The top-k compressor's settings.
struct topk_options {
  /// Entries sent per step, 1 <= k <= the gradient's size. 1% of the values sends 8 bytes
  /// for each of them: 2% of float32's bytes, 50x fewer.
  std::size_t k = 0;
  /// Keep what was not sent as the residual (error feedback). Off: it is dropped.
  bool error_feedback = true;
};

/// Top-k sparsification with error feedback: sends the k entries of gradient + residual
/// with the largest magnitudes (ties go to the lower position, so the choice is the same
/// everywhere) and keeps the rest as the residual. Not thread-safe: one owner.
class topk_compressor {
public:
  /// A compressor for gradients of `size` values (at most 2^32 − 1). invalid_argument
  /// for size 0, a larger size, k 0, or k > size.
  [[nodiscard]] static expected<topk_compressor> make(std::size_t size, topk_options opts);

  /// Compresses v = gradient + residual: the k largest |v| go in the packet, the rest
  /// stay as the residual. invalid_argument, with the residual unchanged, when
  /// gradient.size() differs from size() or a value of v is not finite.
  /// Average cost O(n) (a selection, then a sort of the k positions).
  [[nodiscard]] expected<topk_packet> compress(std::span<const float> gradient);

  [[nodiscard]] std::span<const float> residual() const noexcept { return residual_; }
  void reset() noexcept;
  /// As sign_compressor::restore.
  [[nodiscard]] expected<void> restore(std::span<const float> residual);
  [[nodiscard]] std::size_t size() const noexcept { return residual_.size(); }
  [[nodiscard]] const topk_options& options() const noexcept { return opts_; }

private:
  topk_compressor(std::size_t size, topk_options opts);
  topk_options opts_;
  std::vector<float> residual_;
  /// Positions, reused between steps to spare an allocation of n per step.
  std::vector<std::uint32_t> order_;
};

/// Checks that a packet (from the wire) is well formed: its parts have the sizes `size`
/// and `block_size` call for, the bits past `size` are zero, scales are finite and not
/// negative. invalid_argument saying what is wrong.
[[nodiscard]] expected<void> validate(const sign_packet& p);
/// Checks that indices and values have the same length, at most `size`, that indices
/// increase strictly and stay below `size`, and that values are finite.
[[nodiscard]] expected<void> validate(const topk_packet& p);

/// Writes the decoded values into `out` (every value: zeros where top-k sent nothing).
/// invalid_argument when out.size() differs from p.size or p is malformed (`validate`);
/// `out` is untouched then.
[[nodiscard]] expected<void> decompress(const sign_packet& p, std::span<float> out);
[[nodiscard]] expected<void> decompress(const topk_packet& p, std::span<float> out);

/// Adds `weight` times the decoded values to `sum` (a receiver summing or averaging its
/// peers' packets without decoding each into a buffer of its own). invalid_argument, with
/// `sum` untouched, as for decompress.
[[nodiscard]] expected<void> accumulate_into(const sign_packet& p, std::span<float> sum,
                                             float weight = 1.0f);
[[nodiscard]] expected<void> accumulate_into(const topk_packet& p, std::span<float> sum,
                                             float weight = 1.0f);

} // namespace celer::trainer
