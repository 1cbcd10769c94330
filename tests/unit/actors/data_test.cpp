#include <celer/actors/data.hpp>

#include "io_error.hpp"  // actors/common

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

using namespace celer::actors;

TEST_CASE("the shipped UCI digits load: 1,797 samples of 64 pixels in [0, 1], ten classes",
          "[actors][data]") {
  auto d = load_digits();
  REQUIRE(d.has_value());
  CHECK(d->size() == 1797);
  CHECK(d->features() == 64);
  CHECK(d->x.size() == 1797 * 64);
  CHECK(d->classes == 10);
  std::map<std::int64_t, int> per_class;
  for (auto y : d->y) ++per_class[y];
  CHECK(per_class.size() == 10);
  CHECK(per_class[0] == 178);
  CHECK(per_class[1] == 182);
  float lo = 1;
  float hi = 0;
  for (auto v : d->x) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  CHECK(lo == 0.0f);
  CHECK(hi == 1.0f);
  // The first sample is a 0 (the file's first line).
  CHECK(d->y[0] == 0);
  CHECK(d->x[2] == 5.0f / 16.0f);
}

TEST_CASE("a stratified split keeps each class's share and is the same for the same seed",
          "[actors][data]") {
  auto d = load_digits();
  REQUIRE(d.has_value());
  auto [train, valid] = split(*d, 0.2, 7);
  CHECK(train.size() + valid.size() == d->size());
  CHECK(train.x.size() == train.size() * 64);
  std::map<std::int64_t, int> per_class;
  for (auto y : valid.y) ++per_class[y];
  for (auto& [label, n] : per_class) CHECK((n == 36 || n == 35 || n == 37));
  auto [train2, valid2] = split(*d, 0.2, 7);
  CHECK(train2.y == train.y);
  CHECK(valid2.x == valid.x);
  auto [train3, valid3] = split(*d, 0.2, 8);
  CHECK(train3.y != train.y);
}

TEST_CASE("bad data files give errors that name the file and the fault", "[actors][data]") {
  const auto dir = std::filesystem::temp_directory_path() / "celer-data-test";
  std::filesystem::create_directories(dir);
  SECTION("missing") {
    auto d = load_digits((dir / "nope.csv.gz").string());
    REQUIRE(!d.has_value());
    CHECK(d.error().code() == celer::error_code::not_found);
    CHECK_THAT(d.error().message(), Catch::Contains("nope.csv.gz does not exist"));
  }
  SECTION("a line of the wrong shape") {
    std::ofstream(dir / "bad.csv") << "1,2,3\n";
    auto d = load_digits((dir / "bad.csv").string());
    REQUIRE(!d.has_value());
    CHECK_THAT(d.error().message(), Catch::Contains("line 1: expected 64 pixels"));
  }
  SECTION("not an IDX file") {
    std::ofstream(dir / "x.idx") << "hello";
    auto d = load_idx((dir / "x.idx").string(), (dir / "x.idx").string());
    REQUIRE(!d.has_value());
    CHECK_THAT(d.error().message(), Catch::Contains("is not an IDX file"));
  }
  SECTION("an IDX pair of images and labels") {
    {
      std::ofstream img(dir / "img.idx", std::ios::binary);
      const unsigned char h[] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2};
      img.write(reinterpret_cast<const char*>(h), sizeof h);
      const unsigned char px[] = {0, 255, 51, 102, 255, 255, 0, 0};
      img.write(reinterpret_cast<const char*>(px), sizeof px);
      std::ofstream lab(dir / "lab.idx", std::ios::binary);
      const unsigned char l[] = {0, 0, 8, 1, 0, 0, 0, 2, 3, 1};
      lab.write(reinterpret_cast<const char*>(l), sizeof l);
    }
    auto d = load_idx((dir / "img.idx").string(), (dir / "lab.idx").string());
    REQUIRE(d.has_value());
    CHECK(d->sample_shape == std::vector<std::int64_t>{1, 2, 2});
    CHECK(d->y == std::vector<std::int64_t>{3, 1});
    CHECK(d->classes == 4);
    CHECK(d->x[1] == 1.0f);
    CHECK(d->x[2] == Approx(0.2f));
  }
}

TEST_CASE("a refused file says, in a confined job's process, which folders it may reach and how to name more",
          "[actors][data]") {
  ::unsetenv("CELER_JOB_CONFINED");
  const auto plain = celer::actors::detail::io_error(EACCES, "cannot open", "/srv/data.csv");
  CHECK(plain.code() == celer::error_code::permission_denied);
  CHECK(plain.message() == "cannot open /srv/data.csv: Permission denied");
  ::setenv("CELER_JOB_CONFINED", "user 61190, Landlock", 1);
  const auto confined = celer::actors::detail::io_error(EACCES, "cannot open", "/srv/data.csv");
  ::unsetenv("CELER_JOB_CONFINED");
  CHECK(confined.code() == celer::error_code::permission_denied);
  CHECK(confined.message().starts_with("cannot open /srv/data.csv: Permission denied (this process runs confined, as user 61190"));
  CHECK(confined.message().find("CELER_JOB_READ_PATHS") != std::string::npos);
  CHECK(confined.message().find("CELER_JOB_WRITE_PATHS") != std::string::npos);
  // A full disk is not a confinement matter.
  ::setenv("CELER_JOB_CONFINED", "Landlock", 1);
  CHECK(celer::actors::detail::io_error(ENOSPC, "writing", "/x").message().find("confined") == std::string::npos);
  ::unsetenv("CELER_JOB_CONFINED");
}

TEST_CASE("Debian's Fashion-MNIST loads: 28x28 images in ten classes", "[actors][data]") {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")) {
    WARN("dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)");
    return;
  }
  auto d = load_fashion_mnist(false, 1000);
  REQUIRE(d.has_value());
  CHECK(d->size() == 1000);
  CHECK(d->sample_shape == std::vector<std::int64_t>{1, 28, 28});
  CHECK(d->classes == 10);
  std::set<std::int64_t> seen(d->y.begin(), d->y.end());
  CHECK(seen.size() == 10);
}
