// Discovery and monitoring through NVML, loaded at run time with dlopen so that the module
// neither needs nvml.h to build nor the driver to run. The few NVML types used are declared
// here from NVML's documented C ABI.

#include <celer/detail/shared_library.hpp>

#include <celer/gpu.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

namespace celer::gpu {
namespace {

// NVML's C ABI (nvml.h), only what is used.
using nvml_return = int;  // nvmlReturn_t; NVML_SUCCESS is 0
constexpr nvml_return nvml_success = 0;
struct nvml_device_st;
using nvml_device = nvml_device_st*;  // nvmlDevice_t
struct nvml_memory {                  // nvmlMemory_t (v1)
  unsigned long long total, free, used;
};
struct nvml_utilization {  // nvmlUtilization_t
  unsigned int gpu, memory;
};
constexpr int nvml_temperature_gpu = 0;          // NVML_TEMPERATURE_GPU
constexpr unsigned int nvml_name_buffer = 96;    // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned int nvml_uuid_buffer = 96;    // NVML_DEVICE_UUID_V2_BUFFER_SIZE

/// nvmlClocksThrottleReason* (= nvmlClocksEventReason*) bits that slow a device down, with
/// the names sample::throttle_reasons uses. Not listed, so never "throttled": GpuIdle (0x1),
/// ApplicationsClocksSetting (0x2) and DisplayClockSetting (0x100), which are settings or
/// rest, not slowdowns.
struct throttle_bit {
  unsigned long long bit;
  const char* name;
};
constexpr throttle_bit throttle_bits[] = {
  {0x4, "power"},         // SwPowerCap
  {0x8, "hw_slowdown"},   // HwSlowdown
  {0x10, "sync_boost"},   // SyncBoost
  {0x20, "thermal"},      // SwThermalSlowdown
  {0x40, "hw_thermal"},   // HwThermalSlowdown
  {0x80, "power_brake"},  // HwPowerBrakeSlowdown
};
constexpr unsigned long long not_throttling = 0x1 | 0x2 | 0x100;

/// An initialised NVML: the library and its entry points. `init` through `handle_by_index`
/// are always set; the others may be null when this NVML lacks them.
struct nvml_api {
  celer::detail::shared_library library;
  nvml_return (*init)() = nullptr;  // nvmlInit_v2
  nvml_return (*count)(unsigned int*) = nullptr;
  nvml_return (*handle_by_index)(unsigned int, nvml_device*) = nullptr;
  nvml_return (*name)(nvml_device, char*, unsigned int) = nullptr;
  nvml_return (*uuid)(nvml_device, char*, unsigned int) = nullptr;
  nvml_return (*memory)(nvml_device, nvml_memory*) = nullptr;
  nvml_return (*compute_capability)(nvml_device, int*, int*) = nullptr;
  nvml_return (*utilization)(nvml_device, nvml_utilization*) = nullptr;
  nvml_return (*temperature)(nvml_device, int, unsigned int*) = nullptr;
  nvml_return (*throttle_reasons)(nvml_device, unsigned long long*) = nullptr;
};

/// The NVMLs opened so far, by path, each initialised once and kept for the life of the
/// process: nvmlShutdown and dlclose are never called, as another thread may still be sampling
/// while statics are destroyed. Guarded by `mutex`, which also serialises the NVML calls (a
/// sample is a handful of calls a second; the fake NVML of the tests need not be thread-safe).
struct nvml_registry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<nvml_api>> opened;
};

nvml_registry& registry() {
  static auto* r = new nvml_registry;  // never destroyed, see above
  return *r;
}

std::string library_path(const std::string& library) {
  if (!library.empty()) return library;
  if (const char* env = std::getenv("CELER_NVML_LIBRARY"); env != nullptr && *env != '\0')
    return env;
  return "libnvidia-ml.so.1";
}

/// The initialised NVML at `path`, or null when it cannot be loaded or initialised. Failures
/// are not remembered, so a driver installed later is found. Call with the registry locked.
nvml_api* open_nvml(const std::string& path) {
  auto& opened = registry().opened;
  if (auto it = opened.find(path); it != opened.end()) return it->second.get();
  auto library = celer::detail::shared_library::open(path);
  if (!library) return nullptr;
  auto api = std::make_unique<nvml_api>(nvml_api{std::move(*library)});
  auto& l = api->library;
  if (!l.resolve(api->init, "nvmlInit_v2") || !l.resolve(api->count, "nvmlDeviceGetCount_v2") ||
      !l.resolve(api->handle_by_index, "nvmlDeviceGetHandleByIndex_v2"))
    return nullptr;
  l.resolve(api->name, "nvmlDeviceGetName");
  l.resolve(api->uuid, "nvmlDeviceGetUUID");
  l.resolve(api->memory, "nvmlDeviceGetMemoryInfo");
  l.resolve(api->compute_capability, "nvmlDeviceGetCudaComputeCapability");
  l.resolve(api->utilization, "nvmlDeviceGetUtilizationRates");
  l.resolve(api->temperature, "nvmlDeviceGetTemperature");
  // Renamed "clocks event reasons" in driver 535; the old name remains as an alias.
  if (!l.resolve(api->throttle_reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
    l.resolve(api->throttle_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (api->init() != nvml_success) return nullptr;
  return opened.emplace(path, std::move(api)).first->second.get();
}

/// The NVML handles of every device, by index; a device NVML cannot hand out is null.
std::vector<nvml_device> handles(const nvml_api& api) {
  unsigned int count = 0;
  if (api.count(&count) != nvml_success) return {};
  std::vector<nvml_device> out(count, nullptr);
  for (unsigned int i = 0; i < count; ++i)
    if (api.handle_by_index(i, &out[i]) != nvml_success) out[i] = nullptr;
  return out;
}

std::string text(nvml_return (*get)(nvml_device, char*, unsigned int), nvml_device d,
                 unsigned int size) {
  std::string buffer(size, '\0');
  if (get(d, buffer.data(), size) != nvml_success) return {};
  buffer.resize(buffer.find('\0') == std::string::npos ? size : buffer.find('\0'));
  return buffer;
}

std::string throttle_names(unsigned long long reasons) {
  std::string out;
  auto add = [&](const char* name) {
    if (!out.empty()) out += ',';
    out += name;
  };
  unsigned long long known = not_throttling;
  for (auto [bit, name] : throttle_bits) {
    if (reasons & bit) add(name);
    known |= bit;
  }
  if (reasons & ~known) add("other");
  return out;
}

} // namespace

std::vector<device> discover(const std::string& library) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  const auto* api = open_nvml(library_path(library));
  // Without names, UUIDs and memory a device cannot be told apart or placed: as good as no NVML.
  if (api == nullptr || !api->name || !api->uuid || !api->memory) return {};
  std::vector<device> out;
  const auto devices = handles(*api);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr) continue;  // e.g. a GPU fallen off the bus: not offered
    device d;
    d.index = static_cast<int>(i);
    d.name = text(api->name, devices[i], nvml_name_buffer);
    d.uuid = text(api->uuid, devices[i], nvml_uuid_buffer);
    d.model = short_model(d.name);
    if (nvml_memory m{}; api->memory(devices[i], &m) == nvml_success) d.memory_bytes = m.total;
    if (api->compute_capability)
      api->compute_capability(devices[i], &d.compute_major, &d.compute_minor);
    d.speed = nominal_speed(d.model);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<sample> sample_devices(const std::string& library) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  const auto* api = open_nvml(library_path(library));
  if (api == nullptr) return {};
  std::vector<sample> out;
  const auto devices = handles(*api);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr) continue;
    sample s;
    s.index = static_cast<int>(i);
    if (nvml_utilization u{}; api->utilization && api->utilization(devices[i], &u) == nvml_success)
      s.utilisation = std::min(u.gpu, 100U) / 100.0;
    if (nvml_memory m{}; api->memory && api->memory(devices[i], &m) == nvml_success)
      s.memory_used_bytes = m.used;
    if (unsigned int t = 0; api->temperature &&
                            api->temperature(devices[i], nvml_temperature_gpu, &t) == nvml_success)
      s.temperature_c = t;
    if (unsigned long long reasons = 0;
        api->throttle_reasons && api->throttle_reasons(devices[i], &reasons) == nvml_success) {
      s.throttle_reasons = throttle_names(reasons);
      s.throttled = !s.throttle_reasons.empty();
    }
    out.push_back(std::move(s));
  }
  return out;
}

} // namespace celer::gpu
