// The speed probe: a short FP32 matrix multiply on one device through the CUDA driver API,
// loaded at run time with dlopen so that the module neither needs cuda.h to build nor a
// driver to run. The few driver types used are declared here from the driver's C ABI.

#include "probe_kernel_ptx.hpp"
#include <celer/detail/shared_library.hpp>

#include <celer/gpu.hpp>

#include <bit>
#include <cstdint>
#include <mutex>
#include <optional>

namespace celer::gpu {
namespace {

// The CUDA driver's C ABI (cuda.h), only what is used. Each entry point is the symbol that
// cuda.h's macros name (cuCtxCreate -> cuCtxCreate_v2 before CUDA 13, ...); drivers keep
// exporting the old ones.
using cu_result = int;  // CUresult; CUDA_SUCCESS is 0
constexpr cu_result cu_success = 0;
using cu_device = int;
using cu_device_ptr = unsigned long long;
struct cu_opaque;
using cu_context = cu_opaque*;
using cu_module = cu_opaque*;
using cu_function = cu_opaque*;
using cu_event = cu_opaque*;
using cu_stream = cu_opaque*;

/// The driver's entry points; resolved all or none.
struct cuda_api {
  celer::detail::shared_library library;
  cu_result (*init)(unsigned int) = nullptr;
  cu_result (*device_count)(int*) = nullptr;
  cu_result (*device_get)(cu_device*, int) = nullptr;
  cu_result (*ctx_create)(cu_context*, unsigned int, cu_device) = nullptr;
  cu_result (*ctx_destroy)(cu_context) = nullptr;
  cu_result (*ctx_synchronize)() = nullptr;
  cu_result (*module_load_data)(cu_module*, const void*) = nullptr;
  cu_result (*module_unload)(cu_module) = nullptr;
  cu_result (*module_get_function)(cu_function*, cu_module, const char*) = nullptr;
  cu_result (*mem_alloc)(cu_device_ptr*, std::size_t) = nullptr;
  cu_result (*mem_free)(cu_device_ptr) = nullptr;
  cu_result (*memset_d32)(cu_device_ptr, unsigned int, std::size_t) = nullptr;
  cu_result (*memcpy_dtoh)(void*, cu_device_ptr, std::size_t) = nullptr;
  cu_result (*launch_kernel)(cu_function, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, unsigned int, cu_stream, void**,
                             void**) = nullptr;
  cu_result (*event_create)(cu_event*, unsigned int) = nullptr;
  cu_result (*event_record)(cu_event, cu_stream) = nullptr;
  cu_result (*event_synchronize)(cu_event) = nullptr;
  cu_result (*event_elapsed_time)(float*, cu_event, cu_event) = nullptr;
  cu_result (*event_destroy)(cu_event) = nullptr;
  cu_result (*get_error_string)(cu_result, const char**) = nullptr;  // optional
};

/// The matrices' side: 2048 gives 17 GFLOP a launch, long enough (milliseconds) for events to
/// time well and short enough for ~0.2 s on a slow device; 3 x 16 MiB of device memory.
constexpr unsigned int side = 2048;
constexpr unsigned int tile = 32;  // the kernel's block side (probe_kernel.cu)
constexpr int timed_launches = 5;

/// The driver, loaded once for the process and never unloaded; nullopt-like (null library
/// pointer) when absent. Guarded by the once-flag; the driver is thread-safe after that.
const cuda_api* cuda() {
  static std::once_flag once;
  static cuda_api* api = nullptr;  // never freed: contexts may outlive static destruction
  std::call_once(once, [] {
    auto library = celer::detail::shared_library::open("libcuda.so.1");
    if (!library) return;
    auto* a = new cuda_api{std::move(*library)};
    auto& l = a->library;
    const bool all =
      l.resolve(a->init, "cuInit") && l.resolve(a->device_count, "cuDeviceGetCount") &&
      l.resolve(a->device_get, "cuDeviceGet") && l.resolve(a->ctx_create, "cuCtxCreate_v2") &&
      l.resolve(a->ctx_destroy, "cuCtxDestroy_v2") &&
      l.resolve(a->ctx_synchronize, "cuCtxSynchronize") &&
      l.resolve(a->module_load_data, "cuModuleLoadData") &&
      l.resolve(a->module_unload, "cuModuleUnload") &&
      l.resolve(a->module_get_function, "cuModuleGetFunction") &&
      l.resolve(a->mem_alloc, "cuMemAlloc_v2") && l.resolve(a->mem_free, "cuMemFree_v2") &&
      l.resolve(a->memset_d32, "cuMemsetD32_v2") && l.resolve(a->memcpy_dtoh, "cuMemcpyDtoH_v2") &&
      l.resolve(a->launch_kernel, "cuLaunchKernel") &&
      l.resolve(a->event_create, "cuEventCreate") && l.resolve(a->event_record, "cuEventRecord") &&
      l.resolve(a->event_synchronize, "cuEventSynchronize") &&
      l.resolve(a->event_elapsed_time, "cuEventElapsedTime") &&
      l.resolve(a->event_destroy, "cuEventDestroy_v2");
    l.resolve(a->get_error_string, "cuGetErrorString");
    if (!all) {
      delete a;
      return;
    }
    api = a;
  });
  return api;
}

/// One probe run's driver objects, released in reverse order however the run ends.
class probe_run {
public:
  explicit probe_run(const cuda_api& api) : api_(api) {}
  probe_run(const probe_run&) = delete;
  probe_run& operator=(const probe_run&) = delete;
  ~probe_run() {
    if (context_ == nullptr) return;
    for (auto e : events_)
      if (e != nullptr) api_.event_destroy(e);
    for (auto p : buffers_)
      if (p != 0) api_.mem_free(p);
    if (module_ != nullptr) api_.module_unload(module_);
    api_.ctx_destroy(context_);  // also pops it from this thread
  }

  /// Checks one driver call: nullopt when it succeeded, else the error naming `what`.
  std::optional<celer::error> check(cu_result r, const char* what) const {
    if (r == cu_success) return std::nullopt;
    const char* text = nullptr;
    if (api_.get_error_string == nullptr || api_.get_error_string(r, &text) != cu_success)
      text = nullptr;
    return celer::error(error_code::unavailable,
                        std::string("GPU speed probe: ") + what + " failed with CUDA error " +
                          std::to_string(r) + (text ? std::string(" (") + text + ")" : ""));
  }

  expected<double> measure(int index) {
    const auto& a = api_;
    cu_device dev = 0;
    int count = 0;
    if (auto e = check(a.init(0), "cuInit")) return *e;
    if (auto e = check(a.device_count(&count), "cuDeviceGetCount")) return *e;
    if (index < 0 || index >= count)
      return celer::error(error_code::unavailable,
                          "GPU speed probe: no CUDA device " + std::to_string(index) + " (" +
                            std::to_string(count) + " visible)");
    if (auto e = check(a.device_get(&dev, index), "cuDeviceGet")) return *e;
    if (auto e = check(a.ctx_create(&context_, 0, dev), "cuCtxCreate")) return *e;
    if (auto e = check(a.module_load_data(&module_, detail::probe_kernel_ptx), "cuModuleLoadData"))
      return *e;
    cu_function kernel = nullptr;
    if (auto e = check(a.module_get_function(&kernel, module_, "celer_probe_sgemm"),
                       "cuModuleGetFunction"))
      return *e;
    const std::size_t elements = std::size_t{side} * side;
    for (auto& p : buffers_)
      if (auto e = check(a.mem_alloc(&p, elements * sizeof(float)), "cuMemAlloc")) return *e;
    // A and B all ones, so every element of C = A * B is exactly `side`: checked below, so that
    // a kernel that did not run cannot pass for an infinitely fast device.
    const auto one = std::bit_cast<unsigned int>(1.0f);
    for (int i = 0; i < 2; ++i)
      if (auto e = check(a.memset_d32(buffers_[i], one, elements), "cuMemsetD32")) return *e;
    if (auto e = check(a.memset_d32(buffers_[2], 0, elements), "cuMemsetD32")) return *e;
    for (auto& ev : events_)
      if (auto e = check(a.event_create(&ev, 0), "cuEventCreate")) return *e;

    int n = side;
    void* args[] = {&buffers_[0], &buffers_[1], &buffers_[2], &n};
    auto launch = [&] {
      return a.launch_kernel(kernel, side / tile, side / tile, 1, tile, tile, 1,
                             /*sharedMemBytes=*/0, /*hStream=*/nullptr, args, nullptr);
    };
    // The first launch warms up: JIT cache, clocks, TLBs.
    if (auto e = check(launch(), "cuLaunchKernel")) return *e;
    if (auto e = check(a.ctx_synchronize(), "cuCtxSynchronize")) return *e;
    if (auto e = check(a.event_record(events_[0], nullptr), "cuEventRecord")) return *e;
    for (int i = 0; i < timed_launches; ++i)
      if (auto e = check(launch(), "cuLaunchKernel")) return *e;
    if (auto e = check(a.event_record(events_[1], nullptr), "cuEventRecord")) return *e;
    if (auto e = check(a.event_synchronize(events_[1]), "cuEventSynchronize")) return *e;
    float ms = 0;
    if (auto e = check(a.event_elapsed_time(&ms, events_[0], events_[1]), "cuEventElapsedTime"))
      return *e;
    float corner = 0;
    if (auto e = check(a.memcpy_dtoh(&corner, buffers_[2], sizeof corner), "cuMemcpyDtoH"))
      return *e;
    if (corner != static_cast<float>(side) || !(ms > 0))
      return celer::error(error_code::unavailable,
                          "GPU speed probe: wrong result on device " + std::to_string(index) +
                            " (C[0] = " + std::to_string(corner) + ", expected " +
                            std::to_string(side) + "; " + std::to_string(ms) + " ms)");
    const double flops = 2.0 * side * side * double(side) * timed_launches;
    return flops / (ms / 1e3) / 1e12;
  }

private:
  const cuda_api& api_;
  cu_context context_ = nullptr;
  cu_module module_ = nullptr;
  cu_device_ptr buffers_[3] = {0, 0, 0};  // A, B, C
  cu_event events_[2] = {nullptr, nullptr};
};

} // namespace

expected<double> probe_speed(int index) {
  const auto* api = cuda();
  if (api == nullptr)
    return celer::error(error_code::unavailable,
                        "GPU speed probe: no CUDA driver (libcuda.so.1 not loadable or incomplete)");
  probe_run run(*api);
  return run.measure(index);
}

} // namespace celer::gpu
