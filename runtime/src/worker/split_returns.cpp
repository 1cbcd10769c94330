#include "worker/split_returns.hpp"

#include <celer/detail/registry.hpp>

#include <msgpack.hpp>

namespace celer {

namespace {

std::uint32_t read_be(std::string_view s, std::size_t at, std::size_t bytes) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

/// Finds where one msgpack value ends without decoding it into objects.
struct skip_visitor : msgpack::null_visitor {
  void parse_error(std::size_t, std::size_t) {
    throw detail::argument_error("the returned tuple is not valid msgpack");
  }
  void insufficient_bytes(std::size_t, std::size_t) {
    throw detail::argument_error("the returned tuple is cut short");
  }
};

} // namespace

std::vector<std::string> split_returns(std::string_view packed, std::uint32_t count) {
  if (packed.empty()) throw detail::argument_error("the call returned nothing");
  const auto first = static_cast<unsigned char>(packed[0]);
  std::uint32_t n = 0;
  std::size_t at = 1;
  if (first >= 0x90 && first <= 0x9f) {
    n = first & 0x0fu;
  } else if (first == 0xdc && packed.size() >= 3) {
    n = read_be(packed, 1, 2);
    at = 3;
  } else if (first == 0xdd && packed.size() >= 5) {
    n = read_be(packed, 1, 4);
    at = 5;
  } else {
    throw detail::argument_error(
                    "the call was to return " + std::to_string(count) +
                      " values (a std::tuple), but returned one value that is not a tuple");
  }
  if (n != count) {
    throw detail::argument_error(
                    "the call was to return " + std::to_string(count) + " values, but returned " +
                      std::to_string(n) + " (the caller's and the worker's binaries differ?)");
  }
  std::vector<std::string> out;
  out.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    skip_visitor skip;
    std::size_t off = at;
    if (at >= packed.size() || !msgpack::parse(packed.data(), packed.size(), off, skip)) {
      throw detail::argument_error("the returned tuple is cut short at value " +
                                                      std::to_string(i + 1));
    }
    out.emplace_back(packed.substr(at, off - at));
    at = off;
  }
  if (at != packed.size()) {
    throw detail::argument_error("the returned tuple has bytes after its values");
  }
  return out;
}

} // namespace celer
