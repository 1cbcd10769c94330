// How values are encoded: std::vector of numbers travels as raw bytes (protocol 13), like
// celer::array, inside structs too, and still reads the element-by-element form.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>

using namespace celer_test;

namespace {

struct sample {
  std::string label;
  std::vector<double> features;
  std::vector<std::int64_t> ids;
  MSGPACK_DEFINE(label, features, ids)
  friend bool operator==(const sample&, const sample&) = default;
};

std::vector<float> scaled(std::vector<float> v, float by) {
  for (auto& x : v) x *= by;
  return v;
}
sample relabel(sample s, std::string label) {
  s.label = std::move(label);
  return s;
}
double sum_array(celer::array<float> a) { return std::accumulate(a.begin(), a.end(), 0.0); }

} // namespace

CELER_REMOTE(scaled, relabel, sum_array);

TEST_CASE("a std::vector of numbers packs as its raw bytes, one msgpack bin", "[codec]") {
  const std::vector<float> v{1.5f, -2.0f, 3.25f};
  const auto packed = celer::detail::pack(v);
  // bin8 header (0xc4, length 12), then the floats' bytes as they are in memory.
  REQUIRE(packed.size() == 2 + 12);
  CHECK(static_cast<unsigned char>(packed[0]) == 0xc4);
  CHECK(static_cast<unsigned char>(packed[1]) == 12);
  CHECK(std::memcmp(packed.data() + 2, v.data(), 12) == 0);
  CHECK(celer::detail::unpack<std::vector<float>>(packed, "v") == v);
  // The same bytes as celer::array<float>: either reads the other.
  CHECK(celer::detail::pack(celer::array<float>(v)) == packed);
  CHECK(celer::detail::unpack<celer::array<float>>(packed, "v").to_vector() == v);
  // Every number type but the character types and bool.
  CHECK(celer::detail::unpack<std::vector<std::int64_t>>(
          celer::detail::pack(std::vector<std::int64_t>{-1, 1LL << 40}), "v") ==
        std::vector<std::int64_t>{-1, 1LL << 40});
  CHECK(celer::detail::unpack<std::vector<std::uint16_t>>(
          celer::detail::pack(std::vector<std::uint16_t>{7, 65535}), "v") ==
        std::vector<std::uint16_t>{7, 65535});
  CHECK(celer::detail::unpack<std::vector<double>>(celer::detail::pack(std::vector<double>{}), "v").empty());
  // Untouched: bool (msgpack booleans), strings (an array of str), nested vectors (an array of bins).
  CHECK(static_cast<unsigned char>(celer::detail::pack(std::vector<bool>{true})[0]) == 0x91);
  CHECK(static_cast<unsigned char>(celer::detail::pack(std::vector<std::string>{"a"})[0]) == 0x91);
  const std::vector<std::vector<int>> nested{{1, 2}, {3}};
  const auto nested_packed = celer::detail::pack(nested);
  CHECK(static_cast<unsigned char>(nested_packed[0]) == 0x92);
  CHECK(static_cast<unsigned char>(nested_packed[1]) == 0xc4);
  CHECK(celer::detail::unpack<std::vector<std::vector<int>>>(nested_packed, "v") == nested);
}

TEST_CASE("a vector of numbers inside a user's MSGPACK_DEFINE struct takes the bulk form too",
          "[codec]") {
  sample s{"cat", std::vector<double>(1000), {1, 2, 3}};
  std::iota(s.features.begin(), s.features.end(), 0.5);
  const auto packed = celer::detail::pack(s);
  // A 3-array, "cat", a bin16 of 8000 bytes, a bin8 of 24: the data plus their headers.
  CHECK(packed.size() == 1 + 4 + (3 + 8000) + (2 + 24));
  CHECK(celer::detail::unpack<sample>(packed, "s") == s);
}

TEST_CASE("a vector of numbers still reads the element-by-element form other writers produce",
          "[codec]") {
  // [1, 2.5, -3] as a msgpack array: positive fixint, float64, negative fixint.
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(1);
  pk.pack(2.5);
  pk.pack(-3);
  const std::string legacy(buf.data(), buf.size());
  CHECK(celer::detail::unpack<std::vector<double>>(legacy, "v") == std::vector<double>{1, 2.5, -3});
  // Not numbers: the usual clear error.
  CHECK_THROWS_WITH(celer::detail::unpack<std::vector<int>>(celer::detail::pack(std::string("x")), "argument 1 of f"),
                    Catch::Contains("argument 1 of f does not match the expected type"));
  // Raw bytes that are not a whole number of elements are refused, not truncated.
  CHECK_THROWS_WITH(celer::detail::unpack<std::vector<float>>(celer::detail::pack(celer::bytes("abcdefg")), "v"),
                    Catch::Contains("does not match the expected type"));
}

TEST_CASE("vectors of numbers go through tasks and the store and come back equal", "[codec]") {
  scoped_runtime rt;
  std::vector<float> big(1 << 20);
  std::iota(big.begin(), big.end(), 0.0f);
  // 4 MiB: above inline_object_bytes, so it is stored and mapped.
  const auto back = celer::get(celer::task(scaled).remote(big, 2.0f));
  REQUIRE(back.size() == big.size());
  CHECK(back[12345] == 24690.0f);
  CHECK(celer::get(celer::put(big)) == big);
  CHECK(celer::get(celer::task(sum_array).remote(celer::array<float>(big))) ==
        Approx(std::accumulate(big.begin(), big.end(), 0.0)));
  sample s{"dog", std::vector<double>(50000, 0.25), {7}};
  CHECK(celer::get(celer::task(relabel).remote(s, std::string("wolf"))) ==
        sample{"wolf", s.features, s.ids});
}
