#include <celer/gpu.hpp>

#include <catch2/catch.hpp>

using namespace celer::gpu;

namespace {
constexpr std::uint64_t gib = 1ULL << 30;

/// The message of a failed parse ("" when it succeeded), for matching in CHECKs.
std::string parse_error(std::string_view spec) {
  auto r = parse_declared(spec);
  return r ? std::string() : r.error().message();
}
} // namespace

TEST_CASE("a declaration lists its devices in order with counts, memory and nominal speeds",
          "[declared]") {
  auto r = parse_declared("A100-80GB:2,V100-16GB:2");
  REQUIRE(r);
  const auto& d = *r;
  REQUIRE(d.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(d[i].index == i);
    CHECK(d[i].declared);
  }
  CHECK(d[0].model == "A100");
  CHECK(d[0].name == "A100-80GB");
  CHECK(d[0].memory_bytes == 80 * gib);
  CHECK(d[0].speed == 19.5);
  CHECK(d[0].compute_major == 8);
  CHECK(d[1].model == "A100");
  CHECK(d[2].model == "V100");
  CHECK(d[3].memory_bytes == 16 * gib);
  CHECK(d[3].speed == 15.7);
  CHECK(d[3].compute_major == 7);
  // UUIDs tell the declared devices of a node apart.
  CHECK(d[0].uuid == "declared-A100-0");
  CHECK(d[3].uuid == "declared-V100-3");
}

TEST_CASE("a declaration may give a score, fractional memory and a dashed model", "[declared]") {
  auto r = parse_declared(" H200-141GB@70.5 , MIG-A100-2.5GB:3 , Foo-8GB ");
  REQUIRE(r);
  REQUIRE(r->size() == 5);
  CHECK((*r)[0].model == "H200");
  CHECK((*r)[0].speed == 70.5);
  CHECK((*r)[0].memory_bytes == 141 * gib);
  CHECK((*r)[1].model == "MIG-A100");
  CHECK((*r)[1].name == "MIG-A100-2.5GB");
  CHECK((*r)[1].memory_bytes == 5 * gib / 2);
  CHECK((*r)[3].index == 3);
  // An unknown model has speed 1 and no compute capability.
  CHECK((*r)[4].model == "Foo");
  CHECK((*r)[4].speed == 1.0);
  CHECK((*r)[4].compute_major == 0);
}

TEST_CASE("an empty declaration declares no devices", "[declared]") {
  auto r = parse_declared("");
  REQUIRE(r);
  CHECK(r->empty());
  auto blank = parse_declared("  ");
  REQUIRE(blank);
  CHECK(blank->empty());
}

TEST_CASE("a bad declaration is an invalid_argument naming the bad item", "[declared]") {
  for (const char* bad : {"-80GB", "A100", "A100-GB", "A100-0GB", "A100-80", "A100-80GB:0",
                          "A100-80GB:-1", "A100-80GB:two", "A100-80GB:2x", "A100-80GB@0",
                          "A100-80GB@-3", "A100-80GB@fast", "A100-80GB@inf", "A100-80GBx",
                          "A100-80GB:2:3", "A100-nanGB", "A100-80GB:100000"}) {
    INFO(bad);
    auto r = parse_declared(std::string("V100-16GB,") + bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == celer::error_code::invalid_argument);
    CHECK_THAT(r.error().message(), Catch::Contains(std::string("'") + bad + "'"));
  }
  CHECK_THAT(parse_error("A100-80GB,,V100-16GB"), Catch::Contains("empty item"));
  CHECK_THAT(parse_error("A100-80GB,"), Catch::Contains("empty item"));
}

TEST_CASE("short models come from NVML's full names", "[models]") {
  CHECK(short_model("NVIDIA A100-SXM4-80GB") == "A100");
  CHECK(short_model("NVIDIA A100 80GB PCIe") == "A100");
  CHECK(short_model("Tesla V100-SXM2-16GB") == "V100");
  CHECK(short_model("Tesla T4") == "T4");
  CHECK(short_model("NVIDIA H200") == "H200");
  CHECK(short_model("NVIDIA H100 80GB HBM3") == "H100");
  CHECK(short_model("NVIDIA GeForce RTX 4090") == "RTX4090");
  CHECK(short_model("NVIDIA RTX A6000") == "A6000");
  CHECK(short_model("NVIDIA L40S") == "L40S");
  CHECK(short_model("NVIDIA A10G") == "A10G");
}

TEST_CASE("nominal speeds come from the table, case-insensitively, and unknown models are 1",
          "[models]") {
  CHECK(nominal_speed("V100") == 15.7);
  CHECK(nominal_speed("a100") == 19.5);
  CHECK(nominal_speed("H200") == 67.0);
  CHECK(nominal_speed("L40S") == 91.6);
  CHECK(nominal_speed("RTX4090") == 82.6);
  CHECK(nominal_speed("X9000") == 1.0);
  CHECK(nominal_speed("") == 1.0);
}

TEST_CASE("an accelerator type matches whole tokens of the model or name, case-insensitively",
          "[models]") {
  device a100;
  a100.model = "A100";
  a100.name = "NVIDIA A100-SXM4-80GB";
  CHECK(matches_accelerator(a100, "A100"));
  CHECK(matches_accelerator(a100, "a100"));
  CHECK(matches_accelerator(a100, "NVIDIA A100-SXM4-80GB"));
  CHECK(matches_accelerator(a100, "SXM4-80GB"));
  CHECK_FALSE(matches_accelerator(a100, "A10"));
  CHECK_FALSE(matches_accelerator(a100, "A1000"));
  CHECK_FALSE(matches_accelerator(a100, ""));

  device a10;
  a10.model = "A10";
  a10.name = "NVIDIA A10";
  CHECK(matches_accelerator(a10, "A10"));
  CHECK_FALSE(matches_accelerator(a10, "A100"));

  device rtx;
  rtx.model = "RTX4090";
  rtx.name = "NVIDIA GeForce RTX 4090";
  CHECK(matches_accelerator(rtx, "RTX4090"));
  CHECK(matches_accelerator(rtx, "rtx 4090"));
  CHECK_FALSE(matches_accelerator(rtx, "RTX409"));
}
