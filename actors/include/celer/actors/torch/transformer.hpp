#pragma once
/// A small character-level transformer (a decoder-only language model, GPT-style) and its
/// training step and evaluation over a text from <celer/actors/text.hpp>. Deterministic on
/// the CPU: the initial weights come from torch's generator seeded by transformer_spec::seed,
/// the windows from the sampler's std::mt19937_64; with the same torch::set_num_threads the
/// same seeds give the same losses, bit for bit.
///
///   auto corpus = celer::actors::make_char_corpus(*celer::actors::load_fortunes(), 0.1, 7, "fortunes");
///   auto net = celer::actors::make_char_transformer(
///     {.vocabulary = corpus->vocabulary.size(), .context = 64, .width = 64, .heads = 4, .layers = 2});
///   auto opt = celer::actors::make_optimizer((*net)->parameters(), {.name = "adamw", .lr = 3e-3});
///   auto windows = celer::actors::make_window_sampler(corpus->train, 64, /*seed=*/1);
///   for (int step = 1; step <= 500; ++step) {
///     auto fit = celer::actors::train_step(*net, **opt, *windows, /*batch=*/32);  // expected
///     if (step % 100 == 0) {
///       auto val = celer::actors::evaluate_text(*net, corpus->validation);
///       std::cout << step << " " << fit->loss << " " << val.bits_per_char << "\n";
///     }
///   }

#include <celer/actors/text.hpp>
#include <celer/error.hpp>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <vector>

namespace celer::actors {

/// What transformer to build.
struct transformer_spec {
  /// Token ids 0 .. vocabulary-1 (char_vocabulary::size()).
  std::int64_t vocabulary = 0;
  /// The longest window it reads (learned positions 0 .. context-1).
  std::int64_t context = 64;
  /// The model width (embedding size); a multiple of heads.
  std::int64_t width = 64;
  std::int64_t heads = 4;
  /// Decoder blocks.
  std::int64_t layers = 2;
  /// On attention weights and after each sub-layer, in training only.
  double dropout = 0.0;
  /// Seeds torch's generator for the initial weights.
  std::uint64_t seed = 0;
};

/// Token embedding + learned positional embedding, `layers` pre-norm decoder blocks (causal
/// multi-head self-attention, then a 4×width GELU MLP, each as a residual branch behind a
/// LayerNorm), a final LayerNorm and a linear head. forward() takes ids shaped {batch, T}
/// with T <= context and gives logits shaped {batch, T, vocabulary}: position t sees ids
/// 0..t only.
class char_transformer_impl : public torch::nn::Module {
public:
  explicit char_transformer_impl(const transformer_spec& spec);
  torch::Tensor forward(const torch::Tensor& ids);
  [[nodiscard]] const transformer_spec& spec() const noexcept { return spec_; }

private:
  transformer_spec spec_;
  torch::nn::Embedding tokens_{nullptr};
  torch::nn::Embedding positions_{nullptr};
  torch::nn::ModuleList blocks_;
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE_IMPL(char_transformer, char_transformer_impl);

/// invalid_argument for a vocabulary below 2, a context, width, heads or layers below 1, a
/// width that heads do not divide, or dropout outside [0, 1).
[[nodiscard]] expected<char_transformer> make_char_transformer(const transformer_spec& spec);

/// A language model's figures over some text.
struct text_stats {
  /// Mean cross-entropy per predicted character, in nats, and the same in bits.
  double loss = 0;
  double bits_per_char = 0;
  /// Characters predicted.
  std::int64_t tokens = 0;
  double seconds = 0;
};

/// One optimiser step on `batch` windows drawn from `windows`. `clip_norm` > 0 clips the
/// gradients' total norm first. invalid_argument for windows longer than the model's context
/// or a batch below 1.
[[nodiscard]] expected<text_stats> train_step(char_transformer& model, torch::optim::Optimizer& optimizer,
                                              window_sampler& windows, std::int64_t batch,
                                              double clip_norm = 0.0);

/// The loss over every whole non-overlapping window of `tokens` of the model's context
/// (consecutive_windows), without training (dropout off, no gradients).
text_stats evaluate_text(char_transformer& model, const std::vector<std::int64_t>& tokens,
                         std::int64_t batch = 64);

} // namespace celer::actors
