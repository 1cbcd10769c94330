#include "stages.hpp"

#include <celer/actors/preprocess/image.hpp>
#include <celer/actors/preprocess/numeric.hpp>
#include <celer/actors/preprocess/sampling.hpp>
#include <celer/actors/preprocess/sharding.hpp>
#include <celer/actors/preprocess/text.hpp>
#include <celer/codec.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

namespace celer::preprocess::detail {

expected<std::string> stage::partial(const std::vector<item>&) const {
  return error(error_code::internal, "partial() of a map stage");
}
expected<std::string> stage::merge(const std::vector<std::string>&) const {
  return error(error_code::internal, "merge() of a map stage");
}
std::string stage::describe(const std::string&) const { return {}; }

namespace {

/// A stage's parameters as given, read by type; whatever is left unread is refused.
class params {
public:
  explicit params(const std::map<std::string, std::string>& p) : p_(p) {}

  template <class T>
  expected<T> number(const std::string& name, T fallback, T low, T high) {
    used_.insert(name);
    auto it = p_.find(name);
    if (it == p_.end()) return fallback;
    T v{};
    const auto& s = it->second;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || !(v >= low && v <= high))
      return error(error_code::invalid_argument, name + " is '" + s + "'; it must be a number in [" +
                                                     format(low) + ", " + format(high) + "]");
    return v;
  }

  expected<std::string> choice(const std::string& name, std::vector<std::string> allowed) {
    used_.insert(name);
    auto it = p_.find(name);
    if (it == p_.end()) return allowed.front();
    if (std::find(allowed.begin(), allowed.end(), it->second) != allowed.end()) return it->second;
    std::string all;
    for (const auto& a : allowed) all += (all.empty() ? "" : ", ") + a;
    return error(error_code::invalid_argument, name + " is '" + it->second + "'; it must be one of " + all);
  }

  expected<void> done() const {
    for (const auto& [k, v] : p_)
      if (!used_.count(k)) {
        std::string all;
        for (const auto& u : used_) all += (all.empty() ? "" : ", ") + u;
        return error(error_code::invalid_argument,
                     "unknown parameter '" + k + "'" + (all.empty() ? " (it takes none)" : " (it takes " + all + ")"));
      }
    return {};
  }

private:
  template <class T>
  static std::string format(T v) {
    if constexpr (std::is_floating_point_v<T>) {
      char b[32];
      std::snprintf(b, sizeof b, "%g", static_cast<double>(v));
      return b;
    } else {
      return std::to_string(v);
    }
  }
  const std::map<std::string, std::string>& p_;
  std::set<std::string> used_;
};

template <class T>
T unpack_state(const std::string& bytes, const char* what) {
  return celer::detail::unpack<T>(bytes, what);
}

// ---- map stages ---------------------------------------------------------------------------

class lowercase_stage final : public stage {
public:
  expected<void> apply(std::vector<item>& items, const std::string&) const override {
    for (auto& it : items) lowercase(it);
    return {};
  }
};

class tokenize_stage final : public stage {
public:
  expected<void> apply(std::vector<item>& items, const std::string&) const override {
    std::string out;
    for (auto& it : items) {
      out.clear();
      for (auto t : whitespace_tokens(it.text)) {
        if (!out.empty()) out += ' ';
        out += t;
      }
      it.text.swap(out);
    }
    return {};
  }
};

class filter_stage final : public stage {
public:
  filter_stage(std::size_t min, std::size_t max) : min_(min), max_(max) {}
  expected<void> apply(std::vector<item>& items, const std::string&) const override {
    std::erase_if(items, [&](const item& it) { return !keep_by_length(it, min_, max_); });
    return {};
  }

private:
  std::size_t min_, max_;
};

class hash_features_stage final : public stage {
public:
  hash_features_stage(std::uint32_t dims, std::uint64_t seed) : dims_(dims), seed_(seed) {}
  expected<void> apply(std::vector<item>& items, const std::string&) const override {
    std::vector<float> v;
    for (auto& it : items) {
      v.assign(dims_, 0.0f);
      for (auto t : whitespace_tokens(it.text)) v[stable_hash64(t, seed_) % dims_] += 1.0f;
      v.insert(v.end(), it.values.begin(), it.values.end());
      it.values.swap(v);
    }
    return {};
  }

private:
  std::uint32_t dims_;
  std::uint64_t seed_;
};

class to_float_stage final : public stage {
public:
  explicit to_float_stage(float scale) : scale_(scale) {}
  expected<void> apply(std::vector<item>& items, const std::string&) const override {
    for (auto& it : items) {
      if (it.pixels.empty())
        return error(error_code::invalid_argument, "item " + it.key + " has no pixels to turn to floats");
      to_float(it, scale_);
    }
    return {};
  }

private:
  float scale_;
};

class augment_stage final : public stage {
public:
  explicit augment_stage(augment_options o) : o_(o) {}
  expected<void> apply(std::vector<item>& items, const std::string&) const override {
    for (auto& it : items)
      if (auto ok = augment(it, o_); !ok) return ok;
    return {};
  }

private:
  augment_options o_;
};

// ---- fitted stages ------------------------------------------------------------------------

class normalize_stage final : public stage {
public:
  explicit normalize_stage(normalize_mode mode) : mode_(mode) {}
  bool fitted() const noexcept override { return true; }
  expected<std::string> partial(const std::vector<item>& items) const override {
    feature_stats s;
    for (const auto& it : items)
      if (auto ok = s.add(it); !ok) return ok.error();
    return celer::detail::pack(s);
  }
  expected<std::string> merge(const std::vector<std::string>& partials) const override {
    feature_stats all;
    for (const auto& p : partials)
      if (auto ok = all.merge(unpack_state<feature_stats>(p, "normalize's statistics")); !ok)
        return ok.error();
    auto n = normalizer::fit(all, mode_);
    if (!n) return n.error();
    // The statistics travel with the normalizer, for describe().
    return celer::detail::pack(std::pair{*n, all});
  }
  expected<void> apply(std::vector<item>& items, const std::string& state) const override {
    const auto n = unpack_state<std::pair<normalizer, feature_stats>>(state, "normalize's state").first;
    for (auto& it : items)
      if (auto ok = n.apply(it); !ok) return ok;
    return {};
  }
  std::string describe(const std::string& state) const override {
    const auto s = unpack_state<std::pair<normalizer, feature_stats>>(state, "normalize's state").second;
    std::string out = std::to_string(s.items) + " items;";
    for (std::size_t f = 0; f < s.width() && f < 4; ++f) {
      char b[96];
      std::snprintf(b, sizeof b, " value %zu mean %.4g sd %.4g", f, s.mean[f], s.stddev(f));
      out += b;
    }
    if (s.width() > 4) out += " ...";
    return out;
  }

private:
  normalize_mode mode_;
};

class vocabulary_stage final : public stage {
public:
  explicit vocabulary_stage(vocab_options o) : o_(std::move(o)) {}
  bool fitted() const noexcept override { return true; }
  expected<std::string> partial(const std::vector<item>& items) const override {
    token_counts c;
    for (const auto& it : items) c.add(it);
    return celer::detail::pack(c);
  }
  expected<std::string> merge(const std::vector<std::string>& partials) const override {
    token_counts all;
    for (const auto& p : partials) all.merge(unpack_state<token_counts>(p, "vocabulary's counts"));
    // The fitted state is the counts: every worker builds the same vocabulary from them.
    if (auto v = vocabulary::build(all, o_); !v) return v.error();
    return celer::detail::pack(all);
  }
  expected<void> apply(std::vector<item>& items, const std::string& state) const override {
    if (state != built_for_) {
      auto v = vocabulary::build(unpack_state<token_counts>(state, "vocabulary's counts"), o_);
      if (!v) return v.error();
      vocab_ = std::move(*v);
      built_for_ = state;
    }
    for (auto& it : items) vocab_->encode(it);
    return {};
  }
  std::string describe(const std::string& state) const override {
    auto v = vocabulary::build(unpack_state<token_counts>(state, "vocabulary's counts"), o_);
    return v ? std::to_string(v->size()) + " ids (" + std::to_string(v->specials()) + " special)" : v.error().message();
  }

private:
  vocab_options o_;
  // A worker's stage builds the vocabulary once per fitted state (one runner per worker,
  // one thread: runner's contract).
  mutable std::string built_for_;
  mutable std::optional<vocabulary> vocab_;
};

class bpe_stage final : public stage {
public:
  explicit bpe_stage(bpe_options o) : o_(o) {}
  bool fitted() const noexcept override { return true; }
  expected<std::string> partial(const std::vector<item>& items) const override {
    word_counts c;
    for (const auto& it : items) c.add(it);
    return celer::detail::pack(c);
  }
  expected<std::string> merge(const std::vector<std::string>& partials) const override {
    word_counts all;
    for (const auto& p : partials) all.merge(unpack_state<word_counts>(p, "bpe's word counts"));
    auto m = bpe_model::train(all, o_);
    if (!m) return m.error();
    return celer::detail::pack(m->merges());
  }
  expected<void> apply(std::vector<item>& items, const std::string& state) const override {
    if (state != built_for_) {
      auto m = bpe_model::from_merges(unpack_state<std::vector<bpe_model::merge>>(state, "bpe's merges"));
      if (!m) return m.error();
      model_ = std::move(*m);
      built_for_ = state;
    }
    for (auto& it : items) model_->encode(it);
    return {};
  }
  std::string describe(const std::string& state) const override {
    const auto merges = unpack_state<std::vector<bpe_model::merge>>(state, "bpe's merges");
    return std::to_string(256 + merges.size()) + " ids (256 bytes, " + std::to_string(merges.size()) + " merges)";
  }

private:
  bpe_options o_;
  mutable std::string built_for_;
  mutable std::optional<bpe_model> model_;
};

/// sample and rebalance: each block's (key hash, label) pairs; the merge orders every item
/// by its key's hash (an order no run or worker changes), runs sampling.hpp's exact plan
/// over the labels in that order, and keeps how often each key hash is used; applying it
/// keeps, drops or copies each item by its key.
class plan_stage : public stage {
public:
  bool fitted() const noexcept override { return true; }
  expected<std::string> partial(const std::vector<item>& items) const override {
    std::vector<std::pair<std::uint64_t, std::int32_t>> keys;
    keys.reserve(items.size());
    for (const auto& it : items) keys.emplace_back(stable_hash64(it.key, 0x706c616e), it.label);
    return celer::detail::pack(keys);
  }
  expected<std::string> merge(const std::vector<std::string>& partials) const override {
    std::vector<std::pair<std::uint64_t, std::int32_t>> all;
    for (const auto& p : partials) {
      auto part = unpack_state<std::vector<std::pair<std::uint64_t, std::int32_t>>>(p, "a plan's keys");
      all.insert(all.end(), part.begin(), part.end());
    }
    std::sort(all.begin(), all.end());
    std::vector<std::int32_t> labels;
    labels.reserve(all.size());
    for (const auto& [h, l] : all) labels.push_back(l);
    auto plan = make_plan(labels);
    if (!plan) return plan.error();
    std::vector<std::pair<std::uint64_t, std::uint32_t>> uses;  // (key hash, times used)
    for (auto i : *plan) {
      if (!uses.empty() && uses.back().first == all[i].first) ++uses.back().second;
      else uses.emplace_back(all[i].first, 1);
    }
    return celer::detail::pack(std::pair{uses, static_cast<std::uint64_t>(all.size())});
  }
  expected<void> apply(std::vector<item>& items, const std::string& state) const override {
    const auto [uses, total] = unpack_state<
      std::pair<std::vector<std::pair<std::uint64_t, std::uint32_t>>, std::uint64_t>>(state, "a plan");
    std::vector<item> out;
    out.reserve(items.size());
    for (auto& it : items) {
      const auto h = stable_hash64(it.key, 0x706c616e);
      auto u = std::lower_bound(uses.begin(), uses.end(), std::pair{h, std::uint32_t{0}});
      if (u == uses.end() || u->first != h) continue;  // not drawn
      // The item, then its copies ("key#1", "key#2", ...), in the block's order.
      const item original = std::move(it);
      out.push_back(original);
      for (std::uint32_t c = 1; c < u->second; ++c) {
        out.push_back(original);
        out.back().key = copy_key(original.key, c);
      }
    }
    items.swap(out);
    return {};
  }
  std::string describe(const std::string& state) const override {
    const auto [uses, total] = unpack_state<
      std::pair<std::vector<std::pair<std::uint64_t, std::uint32_t>>, std::uint64_t>>(state, "a plan");
    std::uint64_t n = 0;
    for (const auto& u : uses) n += u.second;
    return std::to_string(n) + " items from " + std::to_string(total);
  }

protected:
  virtual expected<std::vector<std::uint32_t>> make_plan(const std::vector<std::int32_t>& labels) const = 0;
};

class sample_stage final : public plan_stage {
public:
  sample_stage(double fraction, std::uint64_t seed) : fraction_(fraction), seed_(seed) {}

private:
  expected<std::vector<std::uint32_t>> make_plan(const std::vector<std::int32_t>& labels) const override {
    return stratified_sample(labels, fraction_, seed_);
  }
  double fraction_;
  std::uint64_t seed_;
};

class rebalance_stage final : public plan_stage {
public:
  explicit rebalance_stage(rebalance_options o) : o_(o) {}

private:
  expected<std::vector<std::uint32_t>> make_plan(const std::vector<std::int32_t>& labels) const override {
    return rebalance(labels, o_);
  }
  rebalance_options o_;
};

template <class S, class... A>
expected<std::unique_ptr<stage>> made(params& p, A&&... args) {
  if (auto ok = p.done(); !ok) return ok.error();
  return std::unique_ptr<stage>(std::make_unique<S>(std::forward<A>(args)...));
}

} // namespace

const std::vector<std::string_view>& stage_names() {
  static const std::vector<std::string_view> names = {
    "lowercase", "tokenize", "filter", "hash_features", "normalize", "vocabulary",
    "bpe", "to_float", "augment", "sample", "rebalance"};
  return names;
}

expected<std::unique_ptr<stage>> make_stage(const std::string& op,
                                            const std::map<std::string, std::string>& given) {
  params p(given);
  constexpr auto big = std::numeric_limits<std::uint64_t>::max();
  if (op == "lowercase") return made<lowercase_stage>(p);
  if (op == "tokenize") {
    auto mode = p.choice("mode", {"whitespace"});
    if (!mode) return mode.error();
    return made<tokenize_stage>(p);
  }
  if (op == "filter") {
    auto min = p.number<std::uint64_t>("min_tokens", 0, 0, big);
    if (!min) return min.error();
    auto max = p.number<std::uint64_t>("max_tokens", big, 0, big);
    if (!max) return max.error();
    return made<filter_stage>(p, *min, *max);
  }
  if (op == "hash_features") {
    auto dims = p.number<std::uint32_t>("dims", 256, 1, 1u << 24);
    if (!dims) return dims.error();
    auto seed = p.number<std::uint64_t>("seed", 0, 0, big);
    if (!seed) return seed.error();
    return made<hash_features_stage>(p, *dims, *seed);
  }
  if (op == "to_float") {
    auto scale = p.number<float>("scale", 1.0f / 255.0f, -1e30f, 1e30f);
    if (!scale) return scale.error();
    return made<to_float_stage>(p, *scale);
  }
  if (op == "augment") {
    augment_options o;
    auto hflip = p.number<double>("hflip", 0.5, 0, 1);
    auto vflip = p.number<double>("vflip", 0, 0, 1);
    auto pad = p.number<std::uint32_t>("crop_padding", 0, 0, 1u << 16);
    auto noise = p.number<double>("noise_std", 0, 0, 1e6);
    auto seed = p.number<std::uint64_t>("seed", 0, 0, big);
    if (!hflip) return hflip.error();
    if (!vflip) return vflip.error();
    if (!pad) return pad.error();
    if (!noise) return noise.error();
    if (!seed) return seed.error();
    o.hflip = *hflip, o.vflip = *vflip, o.crop_padding = *pad, o.noise_std = *noise, o.seed = *seed;
    return made<augment_stage>(p, o);
  }
  if (op == "normalize") {
    auto mode = p.choice("mode", {"zscore", "minmax"});
    if (!mode) return mode.error();
    return made<normalize_stage>(p, *mode == "zscore" ? normalize_mode::zscore : normalize_mode::minmax);
  }
  if (op == "vocabulary") {
    vocab_options o;
    auto min = p.number<std::uint64_t>("min_count", 1, 1, big);
    if (!min) return min.error();
    auto max = p.number<std::uint64_t>("max_size", 0, 0, big);
    if (!max) return max.error();
    o.min_count = *min;
    o.max_size = static_cast<std::size_t>(*max);
    return made<vocabulary_stage>(p, o);
  }
  if (op == "bpe") {
    bpe_options o;
    auto size = p.number<std::uint64_t>("vocab_size", o.vocab_size, 256, 1u << 24);
    if (!size) return size.error();
    auto min = p.number<std::uint64_t>("min_pair_count", o.min_pair_count, 1, big);
    if (!min) return min.error();
    o.vocab_size = static_cast<std::size_t>(*size);
    o.min_pair_count = *min;
    return made<bpe_stage>(p, o);
  }
  if (op == "sample") {
    auto fraction = p.number<double>("fraction", 0.1, 1e-12, 1);
    if (!fraction) return fraction.error();
    auto seed = p.number<std::uint64_t>("seed", 0, 0, big);
    if (!seed) return seed.error();
    return made<sample_stage>(p, *fraction, *seed);
  }
  if (op == "rebalance") {
    auto mode = p.choice("mode", {"oversample", "undersample"});
    if (!mode) return mode.error();
    auto seed = p.number<std::uint64_t>("seed", 0, 0, big);
    if (!seed) return seed.error();
    return made<rebalance_stage>(p, rebalance_options{.mode = *mode == "oversample"
                                                                  ? rebalance_mode::oversample
                                                                  : rebalance_mode::undersample,
                                                      .seed = *seed});
  }
  std::string all;
  for (auto n : stage_names()) all += (all.empty() ? "" : ", ") + std::string(n);
  return error(error_code::invalid_argument, "unknown stage '" + op + "' (the stages: " + all + ")");
}

} // namespace celer::preprocess::detail
