// The snapshot builder and its typed small values (kept as exact text).
#include <celer/actors/checkpoint.hpp>

#include "manifest.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace celer::checkpoint {
namespace {

celer::bytes text_bytes(const std::string& s) { return celer::bytes(std::string_view(s)); }

using detail::type_name;

} // namespace

snapshot& snapshot::add(entry e) {
  for (auto& existing : entries_) {
    if (existing.name == e.name) {
      existing = std::move(e);
      return *this;
    }
  }
  entries_.push_back(std::move(e));
  return *this;
}

snapshot& snapshot::add_bytes(std::string name, celer::bytes data,
                              std::map<std::string, std::string> attributes) {
  return add(entry{std::move(name), value_type::bytes, std::move(attributes), std::move(data)});
}

snapshot& snapshot::add_view(std::string name, const void* data, std::size_t size,
                             std::map<std::string, std::string> attributes) {
  // A view with nothing keeping it: the caller promises the memory outlives save().
  celer::bytes view = size == 0 ? celer::bytes() : celer::bytes(data, size, nullptr);
  return add(entry{std::move(name), value_type::bytes, std::move(attributes), std::move(view)});
}

snapshot& snapshot::add_int(std::string name, std::int64_t value) {
  return add(entry{std::move(name), value_type::int64, {}, text_bytes(std::to_string(value))});
}

snapshot& snapshot::add_float(std::string name, double value) {
  // %a is exact: every bit of the double comes back through strtod.
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%a", value);
  return add(entry{std::move(name), value_type::float64, {},
                   celer::bytes(buf, static_cast<std::size_t>(n))});
}

snapshot& snapshot::add_text(std::string name, std::string value) {
  return add(entry{std::move(name), value_type::text, {}, text_bytes(value)});
}

const entry* snapshot::find(std::string_view name) const noexcept {
  for (const auto& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

namespace {
expected<std::string_view> typed(const snapshot& s, std::string_view name, value_type want) {
  const entry* e = s.find(name);
  if (e == nullptr) {
    return error(error_code::not_found, "the snapshot has no entry " + std::string(name));
  }
  if (e->type != want) {
    return error(error_code::invalid_argument, "entry " + std::string(name) + " holds " +
                                                 type_name(e->type) + ", not " + type_name(want));
  }
  return e->data.view();
}
} // namespace

expected<std::int64_t> snapshot::get_int(std::string_view name) const {
  auto text = typed(*this, name, value_type::int64);
  if (!text) return text.error();
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size()) {
    return error(error_code::data_loss, "entry " + std::string(name) + " is not an integer");
  }
  return v;
}

expected<double> snapshot::get_float(std::string_view name) const {
  auto text = typed(*this, name, value_type::float64);
  if (!text) return text.error();
  const std::string s(*text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) {
    return error(error_code::data_loss, "entry " + std::string(name) + " is not a number");
  }
  return v;
}

expected<std::string> snapshot::get_text(std::string_view name) const {
  auto text = typed(*this, name, value_type::text);
  if (!text) return text.error();
  return std::string(*text);
}

std::uint64_t snapshot::logical_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& e : entries_) n += e.data.size();
  return n;
}

} // namespace celer::checkpoint
