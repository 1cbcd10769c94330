#include <celer/gpu.hpp>

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <thread>

using namespace celer::gpu;

namespace {
constexpr std::uint64_t gib = 1ULL << 30;

/// How often the fake NVML at `path` ran nvmlInit_v2; -1 when it is not loaded. (It is
/// loaded by the module, or held by the test, so this dlopen finds the same copy.)
int init_calls(const char* path) {
  void* lib = ::dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return -1;
  auto* fn = reinterpret_cast<int (*)()>(::dlsym(lib, "celer_fake_nvml_init_calls"));
  const int calls = fn ? fn() : -1;
  ::dlclose(lib);
  return calls;
}
} // namespace

TEST_CASE("discover reads every device NVML reports", "[nvml]") {
  const auto devices = discover(CELER_FAKE_NVML);
  REQUIRE(devices.size() == 2);
  const auto& a = devices[0];
  CHECK(a.index == 0);
  CHECK(a.name == "NVIDIA A100-SXM4-80GB");
  CHECK(a.model == "A100");
  CHECK(a.uuid == "GPU-a1000000-0000-0000-0000-000000000000");
  CHECK(a.memory_bytes == 80 * gib);
  CHECK(a.compute_major == 8);
  CHECK(a.compute_minor == 0);
  CHECK(a.speed == 19.5);  // the table's until probe_speed measures
  CHECK_FALSE(a.declared);
  const auto& v = devices[1];
  CHECK(v.index == 1);
  CHECK(v.model == "V100");
  CHECK(v.name == "Tesla V100-SXM2-16GB");
  CHECK(v.memory_bytes == 16 * gib);
  CHECK(v.compute_major == 7);
  CHECK(v.speed == 15.7);
}

TEST_CASE("samples report utilisation, memory, temperature and throttling", "[nvml]") {
  const auto samples = sample_devices(CELER_FAKE_NVML);
  REQUIRE(samples.size() == 2);
  CHECK(samples[0].index == 0);
  CHECK(samples[0].utilisation == Approx(0.75));
  CHECK(samples[0].memory_used_bytes == 10 * gib);
  CHECK(samples[0].temperature_c == 61);
  CHECK_FALSE(samples[0].throttled);  // only idle
  CHECK(samples[0].throttle_reasons.empty());
  CHECK(samples[1].index == 1);
  CHECK(samples[1].utilisation == 1.0);
  CHECK(samples[1].memory_used_bytes == 1 * gib);
  CHECK(samples[1].temperature_c == 84);
  CHECK(samples[1].throttled);
  CHECK(samples[1].throttle_reasons == "power,thermal");
}

TEST_CASE("NVML is initialised once and sampled safely from several threads", "[nvml]") {
  (void)discover(CELER_FAKE_NVML);
  std::vector<std::thread> threads;
  std::vector<std::size_t> seen(4, 0);
  for (std::size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&seen, t] {
      for (int i = 0; i < 50; ++i) seen[t] += sample_devices(CELER_FAKE_NVML).size();
    });
  for (auto& t : threads) t.join();
  for (auto n : seen) CHECK(n == 2 * 50);
  CHECK(init_calls(CELER_FAKE_NVML) == 1);
}

TEST_CASE("an NVML whose init fails gives no devices and no samples", "[nvml]") {
  // The module closes a library whose init failed; the test holds it open to read its count.
  void* held = ::dlopen(CELER_FAKE_NVML_INIT_FAILS, RTLD_NOW);
  REQUIRE(held != nullptr);
  const int before = init_calls(CELER_FAKE_NVML_INIT_FAILS);
  CHECK(discover(CELER_FAKE_NVML_INIT_FAILS).empty());
  CHECK(sample_devices(CELER_FAKE_NVML_INIT_FAILS).empty());
  // A failed init is retried on the next call (the driver may have come up since).
  CHECK(init_calls(CELER_FAKE_NVML_INIT_FAILS) == before + 2);
  ::dlclose(held);
}

TEST_CASE("an NVML without the optional calls leaves those fields at their defaults", "[nvml]") {
  const auto devices = discover(CELER_FAKE_NVML_MINIMAL);
  REQUIRE(devices.size() == 2);
  CHECK(devices[0].model == "A100");
  CHECK(devices[0].memory_bytes == 80 * gib);
  CHECK(devices[0].compute_major == 0);
  const auto samples = sample_devices(CELER_FAKE_NVML_MINIMAL);
  REQUIRE(samples.size() == 2);
  CHECK(samples[1].memory_used_bytes == 1 * gib);
  CHECK(samples[1].utilisation == 0);
  CHECK(samples[1].temperature_c == 0);
  CHECK_FALSE(samples[1].throttled);
}

TEST_CASE("a missing NVML library gives no devices without throwing", "[nvml]") {
  std::vector<device> devices{device{}};
  CHECK_NOTHROW(devices = discover("/nonexistent/libnvidia-ml.so.1"));
  CHECK(devices.empty());
  CHECK(sample_devices("/nonexistent/libnvidia-ml.so.1").empty());
}

TEST_CASE("CELER_NVML_LIBRARY chooses the NVML library when none is passed", "[nvml]") {
  ::setenv("CELER_NVML_LIBRARY", CELER_FAKE_NVML, 1);
  const auto devices = discover();
  ::unsetenv("CELER_NVML_LIBRARY");
  REQUIRE(devices.size() == 2);
  CHECK(devices[1].model == "V100");
}

TEST_CASE("the real NVML reports devices with UUIDs, memory and a recent compute capability",
          "[gpu]") {
  if (std::getenv("CELER_NVML_LIBRARY") != nullptr) ::unsetenv("CELER_NVML_LIBRARY");
  const auto devices = discover();
  if (devices.empty()) {
    WARN("no NVML devices on this machine; skipped");
    return;
  }
  for (const auto& d : devices) {
    INFO(d.name);
    CHECK(d.uuid.rfind("GPU-", 0) == 0);
    CHECK(d.memory_bytes > 0);
    CHECK(d.compute_major >= 7);
    CHECK_FALSE(d.model.empty());
  }
  CHECK(sample_devices().size() == devices.size());
}
