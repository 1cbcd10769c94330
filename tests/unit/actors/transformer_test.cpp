// The character-level transformer (<celer/actors/torch/transformer.hpp>) learning Debian's
// fortunes, deterministically.
#include <celer/actors/text.hpp>
#include <celer/actors/torch/model.hpp>
#include <celer/actors/torch/transformer.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>
#include <map>

using namespace celer::actors;

namespace {

/// The entropy, in bits per character, of the characters' frequencies in `ids`, computed
/// here from the counts (not with the library's unigram_entropy_bits, which it checks).
double entropy_from_counts(const std::vector<std::int64_t>& ids) {
  std::map<std::int64_t, double> counts;
  for (auto id : ids) counts[id] += 1;
  double h = 0;
  for (const auto& [id, c] : counts) {
    const double p = c / static_cast<double>(ids.size());
    h -= p * std::log2(p);
  }
  return h;
}

const char_corpus& fortunes() {
  static const char_corpus corpus = [] {
    auto docs = load_fortunes();
    REQUIRE(docs.has_value());
    auto c = make_char_corpus(*docs, 0.1, /*seed=*/7, "fortunes");
    REQUIRE(c.has_value());
    return *c;
  }();
  return corpus;
}

} // namespace

TEST_CASE("a small transformer learns the fortunes to well below their unigram entropy in 400 steps",
          "[torch][model][text]") {
  torch::set_num_threads(1);
  const auto& corpus = fortunes();
  const double unigram = entropy_from_counts(corpus.validation);
  CHECK(unigram_entropy_bits(corpus.validation) == Approx(unigram));
  // Small enough for about 100 steps a second on one thread: Debian's LibTorch multiplies
  // matrices with the reference BLAS.
  auto net = make_char_transformer({.vocabulary = corpus.vocabulary.size(), .context = 32, .width = 32,
                                    .heads = 4, .layers = 1, .seed = 1});
  REQUIRE(net.has_value());
  auto opt = make_optimizer((*net)->parameters(), {.name = "adamw", .lr = 5e-3});
  REQUIRE(opt.has_value());
  auto windows = make_window_sampler(corpus.train, 32, /*seed=*/2);
  REQUIRE(windows.has_value());
  const auto before = evaluate_text(*net, corpus.validation);
  // Untrained, it guesses about uniformly over the vocabulary.
  CHECK(before.bits_per_char == Approx(std::log2(static_cast<double>(corpus.vocabulary.size()))).epsilon(0.1));
  double seconds = 0;
  for (int step = 1; step <= 400; ++step) {
    auto fit = train_step(*net, **opt, *windows, /*batch=*/16);
    REQUIRE(fit.has_value());
    seconds += fit->seconds;
  }
  const auto after = evaluate_text(*net, corpus.validation);
  INFO("validation: " << before.bits_per_char << " -> " << after.bits_per_char << " bits/char; unigram "
                      << unigram << " bits/char; " << 400 / seconds << " steps/s");
  CHECK(after.tokens == static_cast<std::int64_t>((corpus.validation.size() - 1) / 32 * 32));
  CHECK(after.bits_per_char == Approx(after.loss / std::log(2.0)));
  CHECK(after.bits_per_char < unigram - 1.0);
  WARN("validation " << after.bits_per_char << " bits/char vs unigram " << unigram << "; "
                     << 400 / seconds << " steps/s on one thread");
}

TEST_CASE("the transformer trains deterministically: the same seeds give the same losses, bit for bit",
          "[torch][model][text]") {
  torch::set_num_threads(1);
  const auto& corpus = fortunes();
  auto run = [&] {
    auto net = make_char_transformer({.vocabulary = corpus.vocabulary.size(), .context = 16, .width = 32,
                                      .heads = 2, .layers = 2, .dropout = 0.1, .seed = 5});
    REQUIRE(net.has_value());
    auto opt = make_optimizer((*net)->parameters(), {.name = "adam", .lr = 1e-3});
    REQUIRE(opt.has_value());
    auto windows = make_window_sampler(corpus.train, 16, /*seed=*/6);
    REQUIRE(windows.has_value());
    std::vector<double> losses;
    for (int step = 0; step < 20; ++step) {
      auto fit = train_step(*net, **opt, *windows, 8, /*clip_norm=*/1.0);
      REQUIRE(fit.has_value());
      losses.push_back(fit->loss);
    }
    losses.push_back(evaluate_text(*net, corpus.validation).loss);
    return losses;
  };
  const auto a = run();
  const auto b = run();
  CHECK(a == b);
  CHECK(a[19] < a[0]);
}

TEST_CASE("bad transformer settings are refused with the reason", "[torch][model][text]") {
  CHECK_THAT(make_char_transformer({.vocabulary = 1}).error().message(), Catch::Contains("vocabulary"));
  CHECK_THAT(make_char_transformer({.vocabulary = 10, .width = 30, .heads = 4}).error().message(),
             Catch::Contains("does not split into 4 heads"));
  CHECK_THAT(make_char_transformer({.vocabulary = 10, .layers = 0}).error().message(), Catch::Contains("at least 1"));
  CHECK_THAT(make_char_transformer({.vocabulary = 10, .dropout = 1.0}).error().message(), Catch::Contains("dropout"));
  auto net = make_char_transformer({.vocabulary = 10, .context = 8, .width = 16, .heads = 2, .layers = 1});
  REQUIRE(net.has_value());
  // Causal: changing a later id changes no earlier position's logits.
  auto ids = torch::randint(10, {2, 8}, torch::kLong);
  auto changed = ids.clone();
  changed.index_put_({torch::indexing::Slice(), 5}, (ids.index({torch::indexing::Slice(), 5}) + 1) % 10);
  torch::NoGradGuard no_grad;
  (*net)->eval();
  const auto a = (*net)->forward(ids);
  const auto b = (*net)->forward(changed);
  CHECK(a.sizes() == torch::IntArrayRef({2, 8, 10}));
  CHECK(torch::equal(a.slice(1, 0, 5), b.slice(1, 0, 5)));
  CHECK_FALSE(torch::equal(a.slice(1, 5, 8), b.slice(1, 5, 8)));
  auto opt = make_optimizer((*net)->parameters(), {});
  REQUIRE(opt.has_value());
  std::vector<std::int64_t> text(100, 3);
  auto long_windows = make_window_sampler(text, 9, 1);
  REQUIRE(long_windows.has_value());
  CHECK_THAT(train_step(*net, **opt, *long_windows, 4).error().message(), Catch::Contains("longer than"));
}
