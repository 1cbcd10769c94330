// celer::collective::nccl_group: joining without a GPU or NCCL says what is missing (this
// runs everywhere); with devices ([gpu]), one member per device allreduces and broadcasts
// device memory. The test reaches device memory through the CUDA driver, loaded with dlopen
// as the collective loads it.
#include <celer/actors/nccl.hpp>
#include <celer/celer.hpp>

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <string>
#include <vector>

namespace col = celer::collective;
using Catch::Matchers::Contains;

namespace {

/// The few driver calls a member needs to put floats on its device and read them back.
struct driver {
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int (*primary_retain)(void**, int) = nullptr;
  int (*set_current)(void*) = nullptr;
  int (*alloc)(std::uint64_t*, std::size_t) = nullptr;
  int (*mem_free)(std::uint64_t) = nullptr;
  int (*to_device)(std::uint64_t, const void*, std::size_t) = nullptr;
  int (*to_host)(void*, std::uint64_t, std::size_t) = nullptr;
  driver() {
    if (library == nullptr) return;
    primary_retain = reinterpret_cast<decltype(primary_retain)>(::dlsym(library, "cuDevicePrimaryCtxRetain"));
    set_current = reinterpret_cast<decltype(set_current)>(::dlsym(library, "cuCtxSetCurrent"));
    alloc = reinterpret_cast<decltype(alloc)>(::dlsym(library, "cuMemAlloc_v2"));
    mem_free = reinterpret_cast<decltype(mem_free)>(::dlsym(library, "cuMemFree_v2"));
    to_device = reinterpret_cast<decltype(to_device)>(::dlsym(library, "cuMemcpyHtoD_v2"));
    to_host = reinterpret_cast<decltype(to_host)>(::dlsym(library, "cuMemcpyDtoH_v2"));
  }
};

struct device_member {
  device_member(int size, int rank) : size(size), rank(rank) {}
  /// Joins on device `rank`, allreduces (sum) `count` floats of rank + 1, then broadcasts from
  /// root 0 a buffer each member filled with 100 + rank; returns the sums, then the broadcast.
  std::vector<float> run(std::int64_t count) {
    auto g = col::nccl_group::join({.name = "nccl-test", .world_size = size, .rank = rank, .device = rank});
    if (!g) throw std::runtime_error(g.error().message());
    driver d;
    void* context = nullptr;
    std::uint64_t buffer = 0;
    const auto n = static_cast<std::size_t>(count);
    if (d.primary_retain(&context, rank) != 0 || d.set_current(context) != 0 || d.alloc(&buffer, n * 4) != 0) {
      throw std::runtime_error("no device memory");
    }
    std::vector<float> host(n, static_cast<float>(rank + 1));
    (void)d.to_device(buffer, host.data(), n * 4);
    if (auto ok = g->allreduce(reinterpret_cast<float*>(buffer), n); !ok) throw std::runtime_error(ok.error().message());
    std::vector<float> out(n);
    (void)d.to_host(out.data(), buffer, n * 4);
    std::vector<float> mine(n, static_cast<float>(100 + rank));
    (void)d.to_device(buffer, mine.data(), n * 4);
    if (auto ok = g->broadcast(reinterpret_cast<void*>(buffer), n * 4, /*root=*/0); !ok) {
      throw std::runtime_error(ok.error().message());
    }
    (void)d.to_host(mine.data(), buffer, n * 4);
    (void)d.mem_free(buffer);
    out.insert(out.end(), mine.begin(), mine.end());
    return out;
  }
  int size, rank;
};
device_member* make_device_member(int size, int rank) { return new device_member(size, rank); }

CELER_REMOTE(make_device_member, &device_member::run);

struct scoped_runtime {
  scoped_runtime() { celer::init({.num_cpus = 2}); }
  ~scoped_runtime() { celer::shutdown(); }
};

/// CUDA devices on this node (0 without a driver).
int device_count() {
  auto* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return 0;
  auto init = reinterpret_cast<int (*)(unsigned)>(::dlsym(library, "cuInit"));
  auto count = reinterpret_cast<int (*)(int*)>(::dlsym(library, "cuDeviceGetCount"));
  int n = 0;
  if (init == nullptr || count == nullptr || init(0) != 0 || count(&n) != 0) n = 0;
  return n;
}

} // namespace

TEST_CASE("joining an NCCL group without a GPU or NCCL fails with failed_precondition naming what is missing",
          "[collective]") {
  scoped_runtime rt;
  CHECK(col::nccl_group::join({.name = "", .world_size = 1, .rank = 0}).error().code() ==
        celer::error_code::invalid_argument);
  // A device this node cannot have: missing whether or not there is a GPU.
  const auto far = col::nccl_available(/*device=*/4096);
  REQUIRE_FALSE(far);
  CHECK(far.error().code() == celer::error_code::failed_precondition);
  CHECK_THAT(far.error().message(), Contains("libcuda.so.1") || Contains("libnccl.so.2") || Contains("CUDA device 4096"));
  if (col::nccl_available()) {
    WARN("this node has a GPU and NCCL: the missing-GPU message is checked where they are absent");
    return;
  }
  const auto g = col::nccl_group::join({.name = "no-gpu", .world_size = 1, .rank = 0});
  REQUIRE_FALSE(g);
  CHECK(g.error().code() == celer::error_code::failed_precondition);
  CHECK_THAT(g.error().message(), Contains("joining NCCL group no-gpu as rank 0"));
  CHECK_THAT(g.error().message(), Contains("libcuda.so.1") || Contains("libnccl.so.2") || Contains("CUDA device 0"));
}

TEST_CASE("an NCCL group of one member per device allreduces and broadcasts device memory", "[collective][gpu]") {
  if (auto ok = col::nccl_available(); !ok) {
    WARN("no GPU or NCCL (" << ok.error().message() << "); skipped");
    return;
  }
  scoped_runtime rt;
  const int n = device_count();
  REQUIRE(n >= 1);
  std::vector<celer::actor_handle<device_member>> members;
  for (int r = 0; r < n; ++r) members.push_back(celer::actor(make_device_member).remote(n, r));
  std::vector<celer::object_ref<std::vector<float>>> runs;
  const std::int64_t count = 1'000'003;
  for (auto& m : members) runs.push_back(m.task(&device_member::run).remote(count));
  for (auto& r : runs) {
    const auto got = celer::get(r);
    REQUIRE(got.size() == 2 * static_cast<std::size_t>(count));
    CHECK(got.front() == static_cast<float>(n * (n + 1) / 2));
    CHECK(got[static_cast<std::size_t>(count) - 1] == static_cast<float>(n * (n + 1) / 2));
    CHECK(got[static_cast<std::size_t>(count)] == 100.0f);  // rank 0's, broadcast
    CHECK(got.back() == 100.0f);
  }
}
