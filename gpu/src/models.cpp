// What is known about GPU models without asking a driver: the nominal-speed table, short model
// names from NVML's long ones, accelerator-type matching, and operator declarations.

#include <celer/gpu.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>

namespace celer::gpu {
namespace {

/// A known model: its nominal dense FP32 TFLOPS (the vendor's datasheet figure, boost clock;
/// the SXM part where there are several) and compute capability, used for declared devices.
struct model_facts {
  std::string_view model;
  double tflops;
  int compute_major, compute_minor;
};

// Datasheet figures. Add a model here rather than special-casing it elsewhere.
constexpr std::array<model_facts, 21> known_models{{
  {"K80", 8.7, 3, 7},      {"P4", 5.5, 6, 1},       {"P40", 12.0, 6, 1},
  {"P100", 10.6, 6, 0},    {"V100", 15.7, 7, 0},    {"T4", 8.1, 7, 5},
  {"A100", 19.5, 8, 0},    {"A30", 10.3, 8, 0},     {"A10", 31.2, 8, 6},
  {"A10G", 31.2, 8, 6},    {"A40", 37.4, 8, 6},     {"A6000", 38.7, 8, 6},
  {"RTX3090", 35.6, 8, 6}, {"L4", 30.3, 8, 9},      {"L40", 90.5, 8, 9},
  {"L40S", 91.6, 8, 9},    {"RTX4090", 82.6, 8, 9}, {"H100", 67.0, 9, 0},
  {"H800", 67.0, 9, 0},    {"H200", 67.0, 9, 0},    {"GH200", 67.0, 9, 0},
}};

/// At most this many devices in one declaration: a typo such as "A100-80GB:800" should be an
/// error, not 800 devices. The largest nodes sold have 16 GPUs.
constexpr std::size_t max_declared = 256;

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

bool iequals(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) { return lower(x) == lower(y); });
}

const model_facts* find_model(std::string_view model) {
  auto it = std::ranges::find_if(known_models, [&](auto& m) { return iequals(m.model, model); });
  return it == known_models.end() ? nullptr : &*it;
}

/// Lower-case alphanumeric runs of `text`: "NVIDIA A100-SXM4-80GB" -> nvidia, a100, sxm4, 80gb.
std::vector<std::string> tokens(std::string_view text) {
  std::vector<std::string> out;
  std::string current;
  for (char c : text) {
    if (is_alnum(c)) {
      current += lower(c);
    } else if (!current.empty()) {
      out.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) out.push_back(std::move(current));
  return out;
}

/// Whether `needle` occurs in `haystack` as a contiguous run of whole tokens.
bool contains_tokens(const std::vector<std::string>& haystack,
                     const std::vector<std::string>& needle) {
  return !needle.empty() && !std::ranges::search(haystack, needle).empty();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// A double that is the whole of `text`, finite; nullopt otherwise.
std::optional<double> parse_number(std::string_view text) {
  double value = 0;
  if (text.empty() || !(is_digit(text.front()) || text.front() == '.')) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

celer::error bad_item(std::string_view item, std::string_view why) {
  return {error_code::invalid_argument,
          "bad GPU declaration '" + std::string(item) + "': " + std::string(why) +
            " (expected MODEL-<N>GB[:COUNT][@SCORE], e.g. A100-80GB:2)"};
}

} // namespace

double nominal_speed(std::string_view model) {
  const auto* facts = find_model(model);
  return facts ? facts->tflops : 1.0;
}

std::string short_model(std::string_view nvml_name) {
  // Drop the vendor and product-line words, then take the first remaining word up to its
  // first '-' ("A100-SXM4-80GB" -> "A100"). RTX/GTX/TITAN join the number that follows
  // ("RTX 4090" -> "RTX4090"); before a lettered model they are only a line ("RTX A6000").
  static constexpr std::array<std::string_view, 5> line_words{"nvidia", "tesla", "geforce",
                                                              "quadro", "grid"};
  std::vector<std::string_view> words;
  for (std::size_t pos = 0; pos < nvml_name.size();) {
    const auto end = std::min(nvml_name.find(' ', pos), nvml_name.size());
    auto word = nvml_name.substr(pos, end - pos);
    const bool is_line = std::ranges::any_of(line_words, [&](auto w) { return iequals(w, word); });
    if (!word.empty() && !is_line) words.push_back(word);
    pos = end + 1;
  }
  if (words.empty()) return std::string(trim(nvml_name));
  auto head = [](std::string_view w) { return std::string(w.substr(0, w.find('-'))); };
  const auto first = words[0];
  if ((iequals(first, "RTX") || iequals(first, "GTX") || iequals(first, "TITAN")) &&
      words.size() > 1) {
    if (is_digit(words[1].front())) return std::string(first) + head(words[1]);
    return head(words[1]);
  }
  return head(first);
}

bool matches_accelerator(const device& d, std::string_view accelerator_type) {
  const auto wanted = tokens(accelerator_type);
  if (wanted.empty()) return false;
  if (iequals(trim(accelerator_type), d.model)) return true;
  // "RTX 4090" asks for the model "RTX4090": compare with the separators removed too.
  std::string joined;
  for (auto& t : wanted) joined += t;
  if (iequals(joined, d.model)) return true;
  return contains_tokens(tokens(d.model), wanted) || contains_tokens(tokens(d.name), wanted);
}

expected<std::vector<device>> parse_declared(std::string_view spec) {
  std::vector<device> out;
  if (trim(spec).empty()) return out;
  for (std::size_t pos = 0; pos <= spec.size();) {
    const auto end = std::min(spec.find(',', pos), spec.size());
    const auto item = trim(spec.substr(pos, end - pos));
    pos = end + 1;
    if (item.empty()) return bad_item(item, "empty item");

    auto rest = item;
    double score = 0;
    bool has_score = false;
    if (const auto at = rest.find('@'); at != std::string_view::npos) {
      const auto value = parse_number(rest.substr(at + 1));
      if (!value || *value <= 0) return bad_item(item, "the score after '@' must be a positive number");
      score = *value;
      has_score = true;
      rest = rest.substr(0, at);
    }
    std::size_t count = 1;
    if (const auto colon = rest.find(':'); colon != std::string_view::npos) {
      const auto text = rest.substr(colon + 1);
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
      if (text.empty() || !is_digit(text.front()) || ec != std::errc{} ||
          p != text.data() + text.size() || count == 0)
        return bad_item(item, "the count after ':' must be a positive integer");
      rest = rest.substr(0, colon);
    }
    // rest is MODEL-<N>GB: the memory is the text between the last '-' and "GB".
    if (rest.size() < 2 || !iequals(rest.substr(rest.size() - 2), "GB"))
      return bad_item(item, "the name must end in -<N>GB, the device's memory");
    const auto dash = rest.rfind('-');
    if (dash == std::string_view::npos)
      return bad_item(item, "the name must end in -<N>GB, the device's memory");
    const auto model = rest.substr(0, dash);
    const auto memory_gb = parse_number(rest.substr(dash + 1, rest.size() - 2 - dash - 1));
    if (model.empty()) return bad_item(item, "empty model");
    if (!memory_gb || *memory_gb <= 0) return bad_item(item, "the memory must be a positive number of GB");
    if (out.size() + count > max_declared)
      return bad_item(item, "more than " + std::to_string(max_declared) + " devices in all");

    const auto* facts = find_model(model);
    for (std::size_t i = 0; i < count; ++i) {
      device d;
      d.index = static_cast<int>(out.size());
      d.model = std::string(model);
      d.name = std::string(rest);
      d.uuid = "declared-" + d.model + "-" + std::to_string(d.index);
      // NVIDIA's "80GB" is 80 GiB (the A100 80GB reports 81,920 MiB).
      d.memory_bytes = static_cast<std::uint64_t>(std::llround(*memory_gb * double(1ULL << 30)));
      if (facts) {
        d.compute_major = facts->compute_major;
        d.compute_minor = facts->compute_minor;
      }
      d.speed = has_score ? score : nominal_speed(model);
      d.declared = true;
      out.push_back(std::move(d));
    }
  }
  return out;
}

} // namespace celer::gpu
