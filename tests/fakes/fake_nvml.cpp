// A fake NVML (libnvidia-ml) for machines without GPUs: the C entry points celer::gpu loads,
// over two fixed devices, so that the tests exercise the module's dlopen, symbol lookup and
// parsing. Built three ways (tests/unit/gpu/CMakeLists.txt):
//   plain                           every entry point, nvmlInit_v2 succeeds;
//   CELER_FAKE_NVML_INIT_FAILS      nvmlInit_v2 fails as it does without a driver;
//   CELER_FAKE_NVML_MINIMAL         no compute capability, utilisation, temperature or
//                                   throttle-reason entry points (an old or partial NVML).
// celer_fake_nvml_init_calls() tells the tests how often nvmlInit_v2 ran.

#include <atomic>
#include <cstring>

namespace {

constexpr int success = 0;             // NVML_SUCCESS
constexpr int uninitialized = 1;       // NVML_ERROR_UNINITIALIZED
constexpr int invalid_argument = 2;    // NVML_ERROR_INVALID_ARGUMENT
constexpr int insufficient_size = 7;   // NVML_ERROR_INSUFFICIENT_SIZE
constexpr int driver_not_loaded = 9;   // NVML_ERROR_DRIVER_NOT_LOADED
constexpr unsigned long long gib = 1ULL << 30;

struct fake_device {
  const char* name;
  const char* uuid;
  unsigned long long memory_total, memory_used;
  int major, minor;
  unsigned int utilisation_percent, temperature_c;
  unsigned long long throttle_reasons;
};

fake_device devices[] = {
  {"NVIDIA A100-SXM4-80GB", "GPU-a1000000-0000-0000-0000-000000000000", 80 * gib, 10 * gib, 8, 0,
   75, 61, /*GpuIdle*/ 0x1},
  {"Tesla V100-SXM2-16GB", "GPU-f1000000-0000-0000-0000-000000000001", 16 * gib, 1 * gib, 7, 0,
   100, 84, /*SwPowerCap | SwThermalSlowdown*/ 0x4 | 0x20},
};
constexpr unsigned int device_count = sizeof devices / sizeof devices[0];

std::atomic<int> init_calls{0};
std::atomic<int> initialised{0};  // NVML counts inits and shutdowns

fake_device* from_handle(void* handle) {
  for (auto& d : devices)
    if (handle == &d) return &d;
  return nullptr;
}

int copy_text(const char* text, char* out, unsigned int length) {
  if (out == nullptr) return invalid_argument;
  if (std::strlen(text) + 1 > length) return insufficient_size;
  std::strcpy(out, text);
  return success;
}

struct memory_info {
  unsigned long long total, free, used;
};
struct utilization {
  unsigned int gpu, memory;
};

} // namespace

extern "C" {

__attribute__((visibility("default"))) int celer_fake_nvml_init_calls() { return init_calls; }

__attribute__((visibility("default"))) int nvmlInit_v2() {
  ++init_calls;
#ifdef CELER_FAKE_NVML_INIT_FAILS
  return driver_not_loaded;
#else
  ++initialised;
  return success;
#endif
}

__attribute__((visibility("default"))) int nvmlShutdown() {
  if (initialised == 0) return uninitialized;
  --initialised;
  return success;
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (initialised == 0) return uninitialized;
  if (count == nullptr) return invalid_argument;
  *count = device_count;
  return success;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                                         void** handle) {
  if (initialised == 0) return uninitialized;
  if (index >= device_count || handle == nullptr) return invalid_argument;
  *handle = &devices[index];
  return success;
}

__attribute__((visibility("default"))) int nvmlDeviceGetName(void* handle, char* name,
                                                             unsigned int length) {
  auto* d = from_handle(handle);
  return d ? copy_text(d->name, name, length) : invalid_argument;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* handle, char* uuid,
                                                             unsigned int length) {
  auto* d = from_handle(handle);
  return d ? copy_text(d->uuid, uuid, length) : invalid_argument;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* handle,
                                                                   memory_info* memory) {
  auto* d = from_handle(handle);
  if (d == nullptr || memory == nullptr) return invalid_argument;
  *memory = {d->memory_total, d->memory_total - d->memory_used, d->memory_used};
  return success;
}

#ifndef CELER_FAKE_NVML_MINIMAL
__attribute__((visibility("default"))) int nvmlDeviceGetCudaComputeCapability(void* handle,
                                                                              int* major,
                                                                              int* minor) {
  auto* d = from_handle(handle);
  if (d == nullptr || major == nullptr || minor == nullptr) return invalid_argument;
  *major = d->major;
  *minor = d->minor;
  return success;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void* handle,
                                                                         utilization* u) {
  auto* d = from_handle(handle);
  if (d == nullptr || u == nullptr) return invalid_argument;
  *u = {d->utilisation_percent, d->utilisation_percent / 2};
  return success;
}

__attribute__((visibility("default"))) int nvmlDeviceGetTemperature(void* handle, int sensor,
                                                                    unsigned int* temperature) {
  auto* d = from_handle(handle);
  if (d == nullptr || sensor != 0 || temperature == nullptr) return invalid_argument;
  *temperature = d->temperature_c;
  return success;
}

// Only the pre-535 name: the module must fall back to it.
__attribute__((visibility("default"))) int nvmlDeviceGetCurrentClocksThrottleReasons(
  void* handle, unsigned long long* reasons) {
  auto* d = from_handle(handle);
  if (d == nullptr || reasons == nullptr) return invalid_argument;
  *reasons = d->throttle_reasons;
  return success;
}
#endif

} // extern "C"
