// The character-level transformer (<celer/actors/torch/transformer.hpp>). Attention is
// written out (a fused q/k/v projection, scaled dot products, a causal mask) rather than
// through torch::nn::MultiheadAttention, whose C++ form in LibTorch 1.13 wants
// {T, batch, width} inputs and a float mask: four matmuls read more plainly here.
#include <celer/actors/torch/transformer.hpp>

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <limits>

namespace celer::actors {
namespace {

constexpr double ln2 = 0.69314718055994530942;

/// One pre-norm decoder block: x + attention(norm(x)), then x + mlp(norm(x)).
class decoder_block_impl : public torch::nn::Module {
public:
  explicit decoder_block_impl(const transformer_spec& spec)
      : heads_(spec.heads),
        norm1_(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({spec.width})))),
        qkv_(register_module("qkv", torch::nn::Linear(spec.width, 3 * spec.width))),
        proj_(register_module("proj", torch::nn::Linear(spec.width, spec.width))),
        norm2_(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({spec.width})))),
        up_(register_module("up", torch::nn::Linear(spec.width, 4 * spec.width))),
        down_(register_module("down", torch::nn::Linear(4 * spec.width, spec.width))),
        attention_dropout_(register_module("attention_dropout", torch::nn::Dropout(spec.dropout))),
        residual_dropout_(register_module("residual_dropout", torch::nn::Dropout(spec.dropout))) {}

  /// x: {B, T, C}; `future`: {T, T}, true where a position must not look (above the diagonal).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& future) {
    const auto b = x.size(0);
    const auto t = x.size(1);
    const auto c = x.size(2);
    const auto d = c / heads_;
    // {B, T, 3C} -> three {B, heads, T, d}.
    auto qkv = qkv_(norm1_(x)).view({b, t, 3, heads_, d}).permute({2, 0, 3, 1, 4});
    const auto q = qkv[0];
    const auto k = qkv[1];
    const auto v = qkv[2];
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
    const auto weights = attention_dropout_(torch::softmax(scores, -1));
    const auto mixed = torch::matmul(weights, v).transpose(1, 2).reshape({b, t, c});
    auto y = x + residual_dropout_(proj_(mixed));
    return y + residual_dropout_(down_(torch::gelu(up_(norm2_(y)))));
  }

private:
  std::int64_t heads_;
  torch::nn::LayerNorm norm1_;
  torch::nn::Linear qkv_;
  torch::nn::Linear proj_;
  torch::nn::LayerNorm norm2_;
  torch::nn::Linear up_;
  torch::nn::Linear down_;
  torch::nn::Dropout attention_dropout_;
  torch::nn::Dropout residual_dropout_;
};
TORCH_MODULE_IMPL(decoder_block, decoder_block_impl);

text_stats stats_of(double loss, std::int64_t tokens, std::chrono::steady_clock::time_point start) {
  text_stats s;
  s.loss = loss;
  s.bits_per_char = loss / ln2;
  s.tokens = tokens;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

/// Ids in `v` (count × context, row-major) as a {count, context} tensor over v's memory.
torch::Tensor ids_tensor(std::vector<std::int64_t>& v, std::int64_t count, std::int64_t context) {
  return torch::from_blob(v.data(), {count, context}, torch::kLong);
}

} // namespace

char_transformer_impl::char_transformer_impl(const transformer_spec& spec) : spec_(spec) {
  tokens_ = register_module("tokens", torch::nn::Embedding(spec.vocabulary, spec.width));
  positions_ = register_module("positions", torch::nn::Embedding(spec.context, spec.width));
  for (std::int64_t i = 0; i < spec.layers; ++i) blocks_->push_back(decoder_block(spec));
  register_module("blocks", blocks_);
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({spec.width})));
  head_ = register_module("head", torch::nn::Linear(spec.width, spec.vocabulary));
  // GPT-2's initialisation of the embeddings (LibTorch's default, N(0, 1), starts the
  // residual stream far larger than the blocks' outputs).
  torch::NoGradGuard no_grad;
  tokens_->weight.normal_(0.0, 0.02);
  positions_->weight.normal_(0.0, 0.02);
}

torch::Tensor char_transformer_impl::forward(const torch::Tensor& ids) {
  const auto t = ids.size(1);
  const auto where = torch::arange(t, ids.options());
  auto x = tokens_(ids) + positions_(where);
  const auto future = torch::ones({t, t}, ids.options().dtype(torch::kBool)).triu(1);
  for (const auto& block : *blocks_) x = block->as<decoder_block_impl>()->forward(x, future);
  return head_(norm_(x));
}

expected<char_transformer> make_char_transformer(const transformer_spec& spec) {
  if (spec.vocabulary < 2) {
    return error(error_code::invalid_argument, "a language model needs a vocabulary of at least 2 ids");
  }
  if (spec.context < 1 || spec.width < 1 || spec.heads < 1 || spec.layers < 1) {
    return error(error_code::invalid_argument, "a transformer needs context, width, heads and layers of at least 1");
  }
  if (spec.width % spec.heads != 0) {
    return error(error_code::invalid_argument,
                 "width " + std::to_string(spec.width) + " does not split into " +
                   std::to_string(spec.heads) + " heads");
  }
  if (spec.dropout < 0 || spec.dropout >= 1) {
    return error(error_code::invalid_argument, "dropout must be in [0, 1), not " + std::to_string(spec.dropout));
  }
  torch::manual_seed(spec.seed);
  return char_transformer(spec);
}

expected<text_stats> train_step(char_transformer& model, torch::optim::Optimizer& optimizer,
                                window_sampler& windows, std::int64_t batch, double clip_norm) {
  if (windows.context() > model->spec().context) {
    return error(error_code::invalid_argument,
                 "windows of " + std::to_string(windows.context()) + " ids are longer than the model's context of " +
                   std::to_string(model->spec().context));
  }
  if (batch < 1) return error(error_code::invalid_argument, "a training step needs a batch of at least 1");
  const auto start = std::chrono::steady_clock::now();
  model->train();
  auto w = windows.sample(batch);
  const auto inputs = ids_tensor(w.inputs, w.count, w.context);
  const auto targets = ids_tensor(w.targets, w.count, w.context);
  optimizer.zero_grad();
  const auto logits = model->forward(inputs);
  const auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}),
                                                         targets.reshape({-1}));
  loss.backward();
  if (clip_norm > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), clip_norm);
  optimizer.step();
  return stats_of(loss.item<double>(), w.count * w.context, start);
}

text_stats evaluate_text(char_transformer& model, const std::vector<std::int64_t>& tokens,
                         std::int64_t batch) {
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  model->eval();
  auto w = consecutive_windows(tokens, model->spec().context);
  double sum = 0;
  if (w.count > 0) {
    const auto inputs = ids_tensor(w.inputs, w.count, w.context);
    const auto targets = ids_tensor(w.targets, w.count, w.context);
    for (std::int64_t first = 0; first < w.count; first += batch) {
      const auto last = std::min(first + batch, w.count);
      const auto logits = model->forward(inputs.slice(0, first, last));
      sum += torch::nn::functional::cross_entropy(
               logits.reshape({-1, logits.size(2)}), targets.slice(0, first, last).reshape({-1}),
               torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
               .item<double>();
    }
  }
  model->train();
  const auto n = w.count * w.context;
  return stats_of(n > 0 ? sum / static_cast<double>(n) : 0.0, n, start);
}

} // namespace celer::actors
