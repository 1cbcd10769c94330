// The character-level corpus (<celer/actors/text.hpp>): fortune files, a byte vocabulary,
// the split and the window samplers.
#include <celer/actors/text.hpp>

#include "draw.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>

namespace celer::actors {

expected<std::vector<std::string>> load_fortunes(const std::vector<std::string>& files,
                                                 const std::string& dir_in) {
  const std::string dir = dir_in.empty() ? std::string(debian_fortunes_dir) : dir_in;
  if (files.empty()) return error(error_code::invalid_argument, "no fortune files named");
  std::vector<std::string> entries;
  for (const auto& file : files) {
    const std::string path = dir + "/" + file;
    if (!std::filesystem::is_regular_file(path)) {
      return error(error_code::not_found,
                   path + " does not exist; the fortune files come with Debian's fortunes-min "
                          "(`apt-get install fortunes-min`; scripts/install-deps.sh installs it)");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(error_code::unavailable, "cannot open " + path);
    std::string line;
    std::string entry;
    const auto flush = [&] {
      if (!entry.empty()) entries.push_back(std::move(entry));
      entry.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%") {
        flush();
      } else {
        entry += line;
        entry += '\n';
      }
    }
    if (in.bad()) return error(error_code::data_loss, "reading " + path + " failed");
    flush();
  }
  if (entries.empty()) {
    return error(error_code::invalid_argument, "the fortune files in " + dir + " hold no entry");
  }
  return entries;
}

char_vocabulary::char_vocabulary(std::string_view text) {
  std::array<bool, 256> seen{};
  for (char c : text) seen[static_cast<unsigned char>(c)] = true;
  for (int b = 0; b < 256; ++b) {
    if (!seen[static_cast<std::size_t>(b)]) continue;
    bytes_.push_back(static_cast<char>(b));
    ids_[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(bytes_.size());
  }
}

char char_vocabulary::byte(std::int64_t id) const noexcept {
  if (id < 1 || id >= size()) return '?';
  return bytes_[static_cast<std::size_t>(id - 1)];
}

std::vector<std::int64_t> char_vocabulary::encode(std::string_view text) const {
  std::vector<std::int64_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(id(c));
  return ids;
}

std::string char_vocabulary::decode(const std::vector<std::int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (auto i : ids) text.push_back(byte(i));
  return text;
}

expected<char_corpus> make_char_corpus(const std::vector<std::string>& documents,
                                       double validation_fraction, std::uint64_t seed,
                                       std::string name) {
  if (!(validation_fraction > 0 && validation_fraction < 1)) {
    return error(error_code::invalid_argument,
                 "the validation fraction must be in (0, 1), not " + std::to_string(validation_fraction));
  }
  const auto n_valid = static_cast<std::size_t>(
    std::lround(validation_fraction * static_cast<double>(documents.size())));
  if (n_valid == 0 || n_valid == documents.size()) {
    return error(error_code::invalid_argument,
                 std::to_string(documents.size()) + " documents with a validation fraction of " +
                   std::to_string(validation_fraction) + " leave one part empty");
  }
  std::vector<std::size_t> order(documents.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  detail::shuffle(order, rng);
  std::string valid_text;
  std::string train_text;
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::string& part = i < n_valid ? valid_text : train_text;
    part += documents[order[i]];
    part += "%\n";
  }
  char_corpus c;
  c.name = std::move(name);
  c.vocabulary = char_vocabulary(train_text);
  c.train = c.vocabulary.encode(train_text);
  c.validation = c.vocabulary.encode(valid_text);
  return c;
}

window_sampler::window_sampler(const std::vector<std::int64_t>& tokens, std::int64_t context,
                               std::uint64_t seed)
    : tokens_(&tokens), context_(context), rng_(seed) {}

token_windows window_sampler::sample(std::int64_t count) {
  token_windows w;
  w.count = count;
  w.context = context_;
  const auto ctx = static_cast<std::size_t>(context_);
  w.inputs.reserve(static_cast<std::size_t>(count) * ctx);
  w.targets.reserve(static_cast<std::size_t>(count) * ctx);
  // Starts 0 .. size - context - 1: the last target is the text's last id.
  const std::uint64_t starts = tokens_->size() - ctx;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto at = tokens_->begin() + static_cast<std::ptrdiff_t>(detail::below(rng_, starts));
    w.inputs.insert(w.inputs.end(), at, at + context_);
    w.targets.insert(w.targets.end(), at + 1, at + context_ + 1);
  }
  return w;
}

expected<window_sampler> make_window_sampler(const std::vector<std::int64_t>& tokens,
                                             std::int64_t context, std::uint64_t seed) {
  if (context < 1) return error(error_code::invalid_argument, "a window needs a context of at least 1");
  if (tokens.size() <= static_cast<std::size_t>(context)) {
    return error(error_code::invalid_argument,
                 "a text of " + std::to_string(tokens.size()) + " tokens holds no window of " +
                   std::to_string(context) + " inputs and their targets");
  }
  return window_sampler(tokens, context, seed);
}

token_windows consecutive_windows(const std::vector<std::int64_t>& tokens, std::int64_t context) {
  token_windows w;
  w.context = context;
  if (context < 1 || tokens.size() <= static_cast<std::size_t>(context)) return w;
  const auto ctx = static_cast<std::size_t>(context);
  w.count = static_cast<std::int64_t>((tokens.size() - 1) / ctx);
  for (std::int64_t i = 0; i < w.count; ++i) {
    const auto at = tokens.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(i) * ctx);
    w.inputs.insert(w.inputs.end(), at, at + context);
    w.targets.insert(w.targets.end(), at + 1, at + context + 1);
  }
  return w;
}

double unigram_entropy_bits(const std::vector<std::int64_t>& tokens) {
  if (tokens.empty()) return 0;
  std::vector<std::size_t> counts;
  for (auto t : tokens) {
    const auto i = static_cast<std::size_t>(t);
    if (i >= counts.size()) counts.resize(i + 1);
    ++counts[i];
  }
  const auto n = static_cast<double>(tokens.size());
  double h = 0;
  for (auto c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / n;
    h -= p * std::log2(p);
  }
  return h;
}

} // namespace celer::actors
