// Lower-casing, whitespace tokens, token counts and the word vocabulary (text.hpp). The BPE
// tokenizer is in bpe.cpp; both files' frame (a header line, a checksum line) is
// checked_text_file.cpp's.
#include <celer/actors/preprocess/text.hpp>

#include "checked_text_file.hpp"

#include <algorithm>
#include <set>

namespace celer::preprocess {
namespace {

constexpr std::string_view vocab_magic = "celer-vocabulary";
constexpr std::uint32_t vocab_version = 1;

/// Calls `f(token)` for every whitespace token of `text`, in order.
template <class F>
void for_each_token(std::string_view text, F&& f) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    while (i < n && is_ascii_space(text[i])) ++i;
    const std::size_t start = i;
    while (i < n && !is_ascii_space(text[i])) ++i;
    if (i > start) f(text.substr(start, i - start));
  }
}

bool has_space(std::string_view s) {
  return std::any_of(s.begin(), s.end(), is_ascii_space);
}

std::string in_quotes(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

/// Whether `a` goes before `b` among a vocabulary's counted tokens.
bool ranks_before(std::uint64_t a_count, std::string_view a, std::uint64_t b_count,
                  std::string_view b) {
  return a_count != b_count ? a_count > b_count : a < b;
}

} // namespace

// ---- normalising and splitting ---------------------------------------------------------------

void lowercase(std::string& text) noexcept {
  for (char& c : text)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
}

void lowercase(item& it) noexcept {
  lowercase(it.text);
}

std::vector<std::string_view> whitespace_tokens(std::string_view text) {
  std::vector<std::string_view> out;
  for_each_token(text, [&](std::string_view t) { out.push_back(t); });
  return out;
}

std::size_t count_whitespace_tokens(std::string_view text) noexcept {
  std::size_t n = 0;
  for_each_token(text, [&](std::string_view) { ++n; });
  return n;
}

bool keep_by_length(const item& it, std::size_t min_tokens, std::size_t max_tokens) noexcept {
  const std::size_t n = count_whitespace_tokens(it.text);
  return n >= min_tokens && n <= max_tokens;
}

// ---- counts --------------------------------------------------------------------------------

void token_counts::add(std::string_view text) {
  for_each_token(text, [&](std::string_view t) { add_token(t); });
}

void token_counts::add_token(std::string_view token, std::uint64_t n) {
  if (auto it = counts.find(token); it != counts.end()) {
    it->second += n;
  } else {
    counts.emplace(std::string(token), n);
  }
}

void token_counts::merge(const token_counts& other) {
  // Both maps are sorted: insert with a hint walks them side by side.
  auto hint = counts.begin();
  for (const auto& [token, n] : other.counts) {
    hint = counts.lower_bound(token);
    if (hint != counts.end() && hint->first == token) {
      hint->second += n;
    } else {
      hint = counts.emplace_hint(hint, token, n);
    }
  }
}

std::uint64_t token_counts::count(std::string_view token) const noexcept {
  const auto it = counts.find(token);
  return it == counts.end() ? 0 : it->second;
}

std::uint64_t token_counts::total() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [token, c] : counts) n += c;
  return n;
}

// ---- vocabulary ----------------------------------------------------------------------------

void vocabulary::index() {
  ids_.clear();
  ids_.reserve(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    ids_.emplace(tokens_[i], static_cast<std::uint32_t>(i));
  }
}

expected<vocabulary> vocabulary::build(const token_counts& counts, const vocab_options& options) {
  const auto invalid = [](std::string what) {
    return error(error_code::invalid_argument, "vocabulary::build: " + std::move(what));
  };
  vocabulary v;
  std::set<std::string_view> specials;
  for (const auto& s : options.specials) {
    if (s.empty() || has_space(s)) return invalid("the special " + in_quotes(s) + " is empty or holds whitespace");
    if (!specials.insert(s).second) return invalid("the special " + in_quotes(s) + " is listed twice");
  }
  const auto unknown = std::find(options.specials.begin(), options.specials.end(), options.unknown);
  if (unknown == options.specials.end()) {
    return invalid("the unknown token " + in_quotes(options.unknown) + " is not among the specials");
  }
  if (options.max_size != 0 && options.max_size < options.specials.size()) {
    return invalid("max_size " + std::to_string(options.max_size) + " leaves no room for the " +
                   std::to_string(options.specials.size()) + " specials");
  }
  for (const auto& s : options.specials) {
    v.tokens_.push_back(s);
    v.counts_.push_back(counts.count(s));
  }
  v.specials_ = options.specials.size();
  v.unknown_ = static_cast<std::uint32_t>(unknown - options.specials.begin());

  // The map is in byte order already; a stable sort by count keeps that order among ties.
  std::vector<std::pair<std::string_view, std::uint64_t>> ranked;
  for (const auto& [token, n] : counts.counts) {
    if (n == 0 || n < options.min_count || specials.contains(token)) continue;
    if (token.empty() || has_space(token)) {
      return invalid("the counted token " + in_quotes(token) +
                     " is empty or holds whitespace (whitespace_tokens never makes one)");
    }
    ranked.emplace_back(token, n);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::size_t room = ranked.size();
  if (options.max_size != 0) room = std::min(room, options.max_size - v.specials_);
  if (v.specials_ + room > std::numeric_limits<std::uint32_t>::max()) {
    return invalid("more than 2^32 - 1 ids");
  }
  for (std::size_t i = 0; i < room; ++i) {
    v.tokens_.emplace_back(ranked[i].first);
    v.counts_.push_back(ranked[i].second);
  }
  v.index();
  return v;
}

std::vector<std::uint32_t> vocabulary::encode(std::string_view text) const {
  std::vector<std::uint32_t> out;
  for_each_token(text, [&](std::string_view t) {
    const auto it = ids_.find(t);
    out.push_back(it == ids_.end() ? unknown_ : it->second);
  });
  return out;
}

std::optional<std::uint32_t> vocabulary::id(std::string_view token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string_view> vocabulary::token(std::uint32_t id) const {
  if (id >= tokens_.size()) return std::nullopt;
  return tokens_[id];
}

std::uint64_t vocabulary::count(std::uint32_t id) const noexcept {
  return id < counts_.size() ? counts_[id] : 0;
}

expected<void> vocabulary::save(const std::string& path) const {
  std::string body = std::string(vocab_magic) + " " + std::to_string(vocab_version) +
                     " tokens=" + std::to_string(tokens_.size()) +
                     " specials=" + std::to_string(specials_) +
                     " unknown=" + std::to_string(unknown_) + "\n";
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    body += tokens_[i];
    body += '\t';
    body += std::to_string(counts_[i]);
    body += '\n';
  }
  return detail::write_checked_text(path, body);
}

expected<vocabulary> vocabulary::load(const std::string& path) {
  auto lines = detail::read_checked_text(path, vocab_magic, "vocabulary");
  if (!lines) return lines.error();
  // Line 1: "celer-vocabulary <version> tokens=<n> specials=<k> unknown=<u>".
  std::vector<std::string_view> head;
  for_each_token((*lines)[0], [&](std::string_view t) { head.push_back(t); });
  std::uint64_t version = 0, n = 0, k = 0, u = 0;
  if (head.size() < 2 || !detail::parse_decimal(head[1], version)) {
    return detail::damaged_line(path, 1, "no format version after \"celer-vocabulary\"");
  }
  if (version != vocab_version) {
    return error(error_code::failed_precondition,
                 path + ": vocabulary file version " + std::to_string(version) +
                   "; this build reads version " + std::to_string(vocab_version));
  }
  if (head.size() != 5 || !detail::header_field(head[2], "tokens", n) ||
      !detail::header_field(head[3], "specials", k) || !detail::header_field(head[4], "unknown", u) || k > n ||
      u >= k) {
    return detail::damaged_line(path, 1,
                                "expected \"celer-vocabulary 1 tokens=<n> specials=<k> "
                                "unknown=<u>\" with u < k <= n");
  }
  if (lines->size() - 1 != n) {
    return detail::damaged_line(path, lines->size() + 1,
                                "the file holds " + std::to_string(lines->size() - 1) +
                                  " token lines; its header says " + std::to_string(n));
  }
  vocabulary v;
  v.specials_ = k;
  v.unknown_ = static_cast<std::uint32_t>(u);
  for (std::size_t i = 1; i < lines->size(); ++i) {
    const std::string_view line = (*lines)[i];
    const auto tab = line.find('\t');
    std::uint64_t count = 0;
    if (tab == std::string_view::npos || tab == 0 || has_space(line.substr(0, tab)) ||
        !detail::parse_decimal(line.substr(tab + 1), count)) {
      return detail::damaged_line(path, i + 1, "expected \"<token><tab><count>\", a token "
                                               "without whitespace");
    }
    const auto token = line.substr(0, tab);
    const bool special = i - 1 < k;
    if (!special && (count == 0 || (i - 1 > k && !ranks_before(v.counts_.back(), v.tokens_.back(),
                                                                count, token)))) {
      return detail::damaged_line(path, i + 1,
                                  in_quotes(token) + " is out of order (tokens go by count "
                                                  "descending, then by bytes) or counted 0");
    }
    v.tokens_.emplace_back(token);
    v.counts_.push_back(count);
    if (!v.ids_.emplace(v.tokens_.back(), static_cast<std::uint32_t>(i - 1)).second) {
      return detail::damaged_line(path, i + 1, in_quotes(token) + " is listed twice");
    }
  }
  return v;
}

} // namespace celer::preprocess
