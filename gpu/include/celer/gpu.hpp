#pragma once
/// GPUs: the devices a node has (found through NVML, or declared when there is no driver),
/// monitoring samples, a measured speed score per device, and splitting work across devices in
/// proportion to their speed. NVML and the CUDA driver are loaded at run time (dlopen), so a
/// binary built here runs on machines without them and simply finds no devices.
///
///   auto devices = celer::gpu::discover();                  // empty without a driver
///   if (devices.empty()) {
///     auto declared = celer::gpu::parse_declared("A100-80GB:2,V100-16GB:2");
///     if (declared) devices = *declared;
///   }
///   for (auto& d : devices)
///     if (auto s = celer::gpu::probe_speed(d.index); s) d.speed = *s;
///   auto per_device = celer::gpu::shares(devices, /*total=*/1000);  // items per device

#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace celer::gpu {

/// One GPU of a node, found by NVML or declared by the operator. Plain data; the runtime
/// mirrors it in its protocol.
struct device {
  /// Index as CUDA_VISIBLE_DEVICES counts on its node.
  int index = 0;
  /// NVML's "GPU-…" UUID; for a declared device "declared-<model>-<n>", unique on its node.
  std::string uuid;
  /// Short model, e.g. "A100", "V100", "H200", "RTX4090" (see short_model).
  std::string model;
  /// Full name as NVML gives it ("NVIDIA H200"), or the declared text ("A100-80GB").
  std::string name;
  std::uint64_t memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
  /// Score: dense FP32 matrix-multiply TFLOPS, measured (probe_speed) or declared/nominal.
  double speed = 1.0;
  /// True when the device came from a declaration rather than from NVML.
  bool declared = false;
};

/// The nominal dense FP32 TFLOPS of a known short model ("A100" -> 19.5); 1.0 when unknown.
[[nodiscard]] double nominal_speed(std::string_view model);

/// Parses a declaration such as "A100-80GB:2,V100-16GB:2" into devices with indices 0.. in
/// order. Grammar per comma-separated item: MODEL-<N>GB[:COUNT][@SCORE]; N may be
/// fractional ("MIG-2.5GB"); COUNT defaults to 1; SCORE defaults to nominal_speed(MODEL). The
/// model is the text before the last "-<N>GB". invalid_argument, naming the bad item, on an
/// empty model, missing or zero memory, a count that is not a positive integer, a score that
/// is not positive, or trailing text.
[[nodiscard]] expected<std::vector<device>> parse_declared(std::string_view spec);

/// The short model in an NVML name: "NVIDIA A100-SXM4-80GB" -> "A100",
/// "Tesla V100-SXM2-16GB" -> "V100", "NVIDIA H200" -> "H200",
/// "NVIDIA GeForce RTX 4090" -> "RTX4090", "NVIDIA L40S" -> "L40S".
[[nodiscard]] std::string short_model(std::string_view nvml_name);

/// Whether `d` is of the requested accelerator type, case-insensitively, matching whole
/// tokens of the model or name: "A100" matches model "A100" and name
/// "NVIDIA A100-SXM4-80GB"; "A10" does not match "A100".
[[nodiscard]] bool matches_accelerator(const device& d, std::string_view accelerator_type);

/// The devices NVML sees. NVML is loaded with dlopen from `library` (when empty: the
/// environment variable CELER_NVML_LIBRARY, else "libnvidia-ml.so.1"). No library, a missing
/// symbol, no driver or a failing nvmlInit give an empty vector, never an error or an
/// exception. Each device's speed is nominal_speed(model); probe_speed measures.
[[nodiscard]] std::vector<device> discover(const std::string& library = {});

/// One monitoring reading of one device.
struct sample {
  int index = 0;
  /// 0..1: the fraction of the last sample period the GPU was busy.
  double utilisation = 0;
  std::uint64_t memory_used_bytes = 0;
  double temperature_c = 0;
  /// Any clocks-throttle reason other than idle or application clock settings.
  bool throttled = false;
  /// "thermal,power" etc. (comma-separated); empty when not throttled.
  std::string throttle_reasons;
};

/// Samples every NVML device. The library (chosen as for discover) is opened once per path and
/// kept open for the process; safe to call from any thread. Empty when NVML is absent; a field
/// NVML cannot report stays at its default.
[[nodiscard]] std::vector<sample> sample_devices(const std::string& library = {});

/// Measures device `index`'s speed in FP32 TFLOPS with a short matrix-multiply probe run
/// through the CUDA driver API, loaded with dlopen("libcuda.so.1"): a few hundred
/// milliseconds, most of it creating a context. unavailable, saying why, when there is no
/// driver or no such device, or any CUDA call fails.
[[nodiscard]] expected<double> probe_speed(int index);

/// Splits `total` items across `devices` in proportion to their speed, by largest remainder:
/// the shares sum exactly to `total`. A device with speed <= 0 gets nothing unless every
/// device's is, then the split is equal. Order matches `devices`; empty in, empty out.
[[nodiscard]] std::vector<std::size_t> shares(const std::vector<device>& devices,
                                              std::size_t total);

} // namespace celer::gpu
