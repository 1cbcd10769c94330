// Byte-level BPE: training with incremental pair counts, encoding by merge rank, and the
// model's checksummed text file (text.hpp; format in actors/preprocess/README.md).
#include <celer/actors/preprocess/text.hpp>

#include "checked_text_file.hpp"

#include <algorithm>
#include <cstdio>

namespace celer::preprocess {
namespace {

constexpr std::string_view bpe_magic = "celer-bpe";
constexpr std::uint32_t bpe_version = 1;
constexpr std::uint32_t no_rank = std::numeric_limits<std::uint32_t>::max();

std::uint64_t pair_key(std::uint32_t left, std::uint32_t right) noexcept {
  return (std::uint64_t{left} << 32) | right;
}

/// `bytes` for a file line people read: printable ASCII but the backslash as it is, every
/// other byte (the space, UTF-8's bytes) as \xHH. Never holds whitespace.
std::string escaped(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (u > 0x20 && u < 0x7F && c != '\\') {
      out.push_back(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned>(u));
      out += hex;
    }
  }
  return out;
}

/// A pair that may be merged next, with its count when it was pushed: the heap holds stale
/// entries too, recognised by a count that is no longer the pair's.
struct candidate {
  std::uint64_t count;
  std::uint64_t key;
};

/// The heap's order: the highest count on top, among equal counts the smallest pair.
bool below(const candidate& a, const candidate& b) noexcept {
  return a.count != b.count ? a.count < b.count : a.key > b.key;
}

} // namespace

bpe_model::bpe_model() {
  tokens_.reserve(256);
  for (int b = 0; b < 256; ++b) tokens_.emplace_back(1, static_cast<char>(b));
}

void bpe_model::add_merge(merge m) {
  ranks_.emplace(pair_key(m.first, m.second), static_cast<std::uint32_t>(merges_.size()));
  tokens_.push_back(tokens_[m.first] + tokens_[m.second]);
  merges_.push_back(m);
}

expected<bpe_model> bpe_model::from_merges(std::vector<merge> merges) {
  bpe_model model;
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const auto [left, right] = merges[r];
    const std::string what = "bpe_model: merge " + std::to_string(r) + " (" +
                             std::to_string(left) + ", " + std::to_string(right) + ")";
    if (left >= model.tokens_.size() || right >= model.tokens_.size()) {
      return error(error_code::invalid_argument,
                   what + " names an id not made before it (ids below " +
                     std::to_string(model.tokens_.size()) + " exist)");
    }
    if (model.ranks_.contains(pair_key(left, right))) {
      return error(error_code::invalid_argument, what + " repeats an earlier merge");
    }
    model.add_merge(merges[r]);
  }
  return model;
}

expected<bpe_model> bpe_model::train(const word_counts& words, const bpe_options& options) {
  if (options.vocab_size < 256 || options.vocab_size > (std::size_t{1} << 32)) {
    return error(error_code::invalid_argument,
                 "bpe_model::train: vocab_size " + std::to_string(options.vocab_size) +
                   " is not in [256, 2^32]: the 256 bytes are the first ids");
  }
  const std::uint64_t min_count = std::max<std::uint64_t>(options.min_pair_count, 1);
  bpe_model model;

  // Each distinct word as " " + its bytes, in the counts' (byte) order.
  struct word {
    std::vector<std::uint32_t> symbols;
    std::uint64_t count;
  };
  std::vector<word> ws;
  ws.reserve(words.size());
  for (const auto& [w, n] : words.counts) {
    if (n == 0) continue;
    word x{.symbols = {' '}, .count = n};
    for (const char c : w) x.symbols.push_back(static_cast<unsigned char>(c));
    ws.push_back(std::move(x));
  }

  // Every adjacent pair's weighted count, and the words that hold (or once held) it.
  std::unordered_map<std::uint64_t, std::uint64_t> pair_count;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> where;
  for (std::uint32_t i = 0; i < ws.size(); ++i) {
    const auto& s = ws[i].symbols;
    for (std::size_t j = 0; j + 1 < s.size(); ++j) {
      const auto key = pair_key(s[j], s[j + 1]);
      pair_count[key] += ws[i].count;
      auto& holders = where[key];
      if (holders.empty() || holders.back() != i) holders.push_back(i);
    }
  }
  std::vector<candidate> heap;
  heap.reserve(pair_count.size());
  for (const auto& [key, n] : pair_count) heap.push_back({n, key});
  std::make_heap(heap.begin(), heap.end(), below);

  std::vector<std::uint32_t> visited(ws.size(), no_rank);  // the last merge that rewrote word i
  std::unordered_map<std::uint64_t, std::int64_t> delta;    // this merge's change per pair
  std::vector<std::uint32_t> rewritten;
  while (model.tokens_.size() < options.vocab_size) {
    std::optional<candidate> best;
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), below);
      const candidate c = heap.back();
      heap.pop_back();
      if (const auto it = pair_count.find(c.key); it != pair_count.end() && it->second == c.count) {
        best = c;
        break;
      }
    }
    if (!best || best->count < min_count) break;
    const auto left = static_cast<std::uint32_t>(best->key >> 32);
    const auto right = static_cast<std::uint32_t>(best->key & 0xFFFFFFFFu);
    const auto made = static_cast<std::uint32_t>(model.tokens_.size());
    const auto rank = static_cast<std::uint32_t>(model.merges_.size());
    model.add_merge({left, right});

    // Rewrite only the words that hold the pair: take away all their pairs, merge, add the
    // new ones back. Every new pair holds `made`; the others were there before, so their
    // holder lists already name the word. After the merge no (left, right) is left anywhere.
    const auto holders = std::move(where[best->key]);
    where.erase(best->key);
    delta.clear();
    for (const std::uint32_t i : holders) {
      if (visited[i] == rank) continue;
      visited[i] = rank;
      auto& s = ws[i].symbols;
      const auto n = static_cast<std::int64_t>(ws[i].count);
      bool holds = false;
      for (std::size_t j = 0; j + 1 < s.size() && !holds; ++j)
        holds = s[j] == left && s[j + 1] == right;
      if (!holds) continue;  // a word an earlier merge rewrote
      for (std::size_t j = 0; j + 1 < s.size(); ++j) delta[pair_key(s[j], s[j + 1])] -= n;
      rewritten.clear();
      for (std::size_t j = 0; j < s.size();) {
        if (j + 1 < s.size() && s[j] == left && s[j + 1] == right) {
          rewritten.push_back(made);
          j += 2;
        } else {
          rewritten.push_back(s[j++]);
        }
      }
      s.swap(rewritten);
      for (std::size_t j = 0; j + 1 < s.size(); ++j) {
        const auto key = pair_key(s[j], s[j + 1]);
        delta[key] += n;
        if (s[j] == made || s[j + 1] == made) {
          auto& list = where[key];
          if (list.empty() || list.back() != i) list.push_back(i);
        }
      }
    }
    for (const auto& [key, d] : delta) {
      if (d == 0) continue;
      auto& count = pair_count[key];
      count = static_cast<std::uint64_t>(static_cast<std::int64_t>(count) + d);
      if (count == 0) {
        pair_count.erase(key);
      } else {
        heap.push_back({count, key});
        std::push_heap(heap.begin(), heap.end(), below);
      }
    }
  }
  return model;
}

void bpe_model::encode_word(std::string_view bytes, std::vector<std::uint32_t>& out) const {
  std::vector<std::uint32_t> s;
  s.reserve(bytes.size());
  for (const char c : bytes) s.push_back(static_cast<unsigned char>(c));
  std::vector<std::uint32_t> next;
  while (s.size() > 1) {
    std::uint32_t best = no_rank;
    for (std::size_t j = 0; j + 1 < s.size(); ++j) {
      if (const auto it = ranks_.find(pair_key(s[j], s[j + 1])); it != ranks_.end()) {
        best = std::min(best, it->second);
      }
    }
    if (best == no_rank) break;
    const auto [left, right] = merges_[best];
    next.clear();
    for (std::size_t j = 0; j < s.size();) {
      if (j + 1 < s.size() && s[j] == left && s[j + 1] == right) {
        next.push_back(256 + best);
        j += 2;
      } else {
        next.push_back(s[j++]);
      }
    }
    s.swap(next);
  }
  out.insert(out.end(), s.begin(), s.end());
}

std::vector<std::uint32_t> bpe_model::encode(std::string_view text) const {
  std::vector<std::uint32_t> out;
  std::string marked;
  for (const auto w : whitespace_tokens(text)) {
    marked.assign(1, ' ');
    marked += w;
    encode_word(marked, out);
  }
  return out;
}

expected<std::string> bpe_model::decode(std::span<const std::uint32_t> ids) const {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= tokens_.size()) {
      return error(error_code::invalid_argument,
                   "bpe_model::decode: id " + std::to_string(ids[i]) + " at position " +
                     std::to_string(i) + " is not below the model's size " +
                     std::to_string(tokens_.size()));
    }
    out += tokens_[ids[i]];
  }
  if (out.starts_with(' ')) out.erase(0, 1);
  return out;
}

std::optional<std::string_view> bpe_model::token(std::uint32_t id) const {
  if (id >= tokens_.size()) return std::nullopt;
  return tokens_[id];
}

expected<void> bpe_model::save(const std::string& path) const {
  std::string body = std::string(bpe_magic) + " " + std::to_string(bpe_version) +
                     " merges=" + std::to_string(merges_.size()) + "\n";
  for (std::size_t r = 0; r < merges_.size(); ++r) {
    body += std::to_string(merges_[r].first) + " " + std::to_string(merges_[r].second) + " " +
            escaped(tokens_[256 + r]) + "\n";
  }
  return detail::write_checked_text(path, body);
}

expected<bpe_model> bpe_model::load(const std::string& path) {
  auto lines = detail::read_checked_text(path, bpe_magic, "BPE model");
  if (!lines) return lines.error();
  // Line 1: "celer-bpe <version> merges=<m>".
  const auto head = whitespace_tokens((*lines)[0]);
  std::uint64_t version = 0, m = 0;
  if (head.size() < 2 || !detail::parse_decimal(head[1], version)) {
    return detail::damaged_line(path, 1, "no format version after \"celer-bpe\"");
  }
  if (version != bpe_version) {
    return error(error_code::failed_precondition,
                 path + ": BPE model file version " + std::to_string(version) +
                   "; this build reads version " + std::to_string(bpe_version));
  }
  if (head.size() != 3 || !detail::header_field(head[2], "merges", m)) {
    return detail::damaged_line(path, 1, "expected \"celer-bpe 1 merges=<m>\"");
  }
  if (lines->size() - 1 != m) {
    return detail::damaged_line(path, lines->size() + 1,
                                "the file holds " + std::to_string(lines->size() - 1) +
                                  " merge lines; its header says " + std::to_string(m));
  }
  bpe_model model;
  for (std::size_t i = 1; i < lines->size(); ++i) {
    const auto fields = whitespace_tokens((*lines)[i]);
    std::uint64_t left = 0, right = 0;
    const auto ids = model.tokens_.size();
    if (fields.size() != 3 || !detail::parse_decimal(fields[0], left) ||
        !detail::parse_decimal(fields[1], right)) {
      return detail::damaged_line(path, i + 1, "expected \"<left id> <right id> <bytes>\"");
    }
    if (left >= ids || right >= ids || model.ranks_.contains(pair_key(static_cast<std::uint32_t>(left),
                                                                      static_cast<std::uint32_t>(right)))) {
      return detail::damaged_line(path, i + 1,
                                  "merge (" + std::to_string(left) + ", " + std::to_string(right) +
                                    ") names an id not made before it or repeats a merge");
    }
    model.add_merge({static_cast<std::uint32_t>(left), static_cast<std::uint32_t>(right)});
    if (escaped(model.tokens_.back()) != fields[2]) {
      return detail::damaged_line(path, i + 1,
                                  "the merged bytes are " + escaped(model.tokens_.back()) +
                                    ", the line says " + std::string(fields[2]));
    }
  }
  return model;
}

} // namespace celer::preprocess
