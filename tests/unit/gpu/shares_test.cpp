#include <celer/gpu.hpp>

#include <catch2/catch.hpp>

#include <numeric>

using namespace celer::gpu;

namespace {
std::vector<device> with_speeds(std::initializer_list<double> speeds) {
  std::vector<device> out;
  for (double s : speeds) {
    device d;
    d.index = static_cast<int>(out.size());
    d.speed = s;
    out.push_back(d);
  }
  return out;
}

std::size_t sum(const std::vector<std::size_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::size_t{0});
}
} // namespace

TEST_CASE("work is split in proportion to speed", "[shares]") {
  CHECK(shares(with_speeds({2, 1, 1}), 100) == std::vector<std::size_t>{50, 25, 25});
  CHECK(shares(with_speeds({19.5, 15.7}), 0) == std::vector<std::size_t>{0, 0});
  CHECK(shares(with_speeds({3}), 7) == std::vector<std::size_t>{7});
}

TEST_CASE("largest-remainder rounding sums exactly to the total", "[shares]") {
  // 10 over three equal devices: 3.33 each; the first gets the extra item.
  CHECK(shares(with_speeds({1, 1, 1}), 10) == std::vector<std::size_t>{4, 3, 3});
  // 1,000 over 19.5 : 15.7 : 67 = 190.80 : 153.62 : 655.58; the two largest remainders win.
  CHECK(shares(with_speeds({19.5, 15.7, 67}), 1000) == std::vector<std::size_t>{191, 154, 655});
  for (std::size_t total : {1, 2, 3, 7, 99, 1001, 123457}) {
    auto s = shares(with_speeds({19.5, 15.7, 67, 8.1, 0.3}), total);
    INFO(total);
    CHECK(sum(s) == total);
  }
}

TEST_CASE("a device without speed gets nothing unless no device has any", "[shares]") {
  CHECK(shares(with_speeds({2, 0, 2}), 9) == std::vector<std::size_t>{5, 0, 4});
  CHECK(shares(with_speeds({1, -1, 1}), 3) == std::vector<std::size_t>{2, 0, 1});
  CHECK(shares(with_speeds({0, 0, 0}), 7) == std::vector<std::size_t>{3, 2, 2});
  CHECK(shares(with_speeds({-1, 0}), 4) == std::vector<std::size_t>{2, 2});
}

TEST_CASE("no devices get an empty split", "[shares]") {
  CHECK(shares({}, 100).empty());
}
