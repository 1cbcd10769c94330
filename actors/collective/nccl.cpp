// Allreduce and broadcast of device memory through NCCL (<celer/actors/nccl.hpp>). NCCL and
// the CUDA driver are loaded with dlopen; their few types are declared here with the values
// of nccl.h (NCCL 2) and cuda.h, so that neither header is needed to build.
#include <celer/actors/nccl.hpp>

#include <celer/detail/shared_library.hpp>

#include <celer/celer.hpp>

#include <condition_variable>
#include <cstring>
#include <mutex>

namespace celer::collective {
namespace {

using clock_type = std::chrono::steady_clock;
using celer::detail::shared_library;

// nccl.h
using nccl_result = int;  // ncclResult_t; 0 is ncclSuccess
using nccl_comm = void*;  // ncclComm_t
using nccl_stream = void*;  // cudaStream_t, the same object as a driver CUstream
struct nccl_unique_id {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};
constexpr int nccl_int32 = 2, nccl_uint8 = 1, nccl_int64 = 4, nccl_float32 = 7, nccl_float64 = 8;
constexpr int nccl_sum = 0, nccl_max = 2, nccl_min = 3, nccl_avg = 4;
// cuda.h
using cu_result = int;  // CUresult; 0 is CUDA_SUCCESS
using cu_device = int;
using cu_context = void*;

/// The driver and NCCL, loaded once for the process and never unloaded (communicators and
/// contexts may outlive static destruction); or why not. Guarded by the once-flag.
struct nccl_api {
  shared_library cuda, nccl;
  cu_result (*cu_init)(unsigned) = nullptr;
  cu_result (*cu_device_count)(int*) = nullptr;
  cu_result (*cu_device_get)(cu_device*, int) = nullptr;
  cu_result (*cu_primary_retain)(cu_context*, cu_device) = nullptr;
  cu_result (*cu_primary_release)(cu_device) = nullptr;
  cu_result (*cu_ctx_set_current)(cu_context) = nullptr;
  cu_result (*cu_stream_create)(nccl_stream*, unsigned) = nullptr;
  cu_result (*cu_stream_synchronize)(nccl_stream) = nullptr;
  cu_result (*cu_stream_destroy)(nccl_stream) = nullptr;
  nccl_result (*get_unique_id)(nccl_unique_id*) = nullptr;
  nccl_result (*comm_init_rank)(nccl_comm*, int, nccl_unique_id, int) = nullptr;
  nccl_result (*comm_destroy)(nccl_comm) = nullptr;
  nccl_result (*all_reduce)(const void*, void*, std::size_t, int, int, nccl_comm, nccl_stream) = nullptr;
  nccl_result (*broadcast)(const void*, void*, std::size_t, int, int, nccl_comm, nccl_stream) = nullptr;
  const char* (*get_error_string)(nccl_result) = nullptr;
};

expected<const nccl_api*> load_nccl() {
  static std::once_flag once;
  static expected<const nccl_api*> loaded = error(error_code::internal, "not loaded");
  std::call_once(once, [] {
    auto cuda = shared_library::open("libcuda.so.1");
    if (!cuda) {
      loaded = error(error_code::failed_precondition,
                     "NCCL needs a GPU: the CUDA driver (libcuda.so.1) cannot be loaded on this node");
      return;
    }
    auto nccl = shared_library::open("libnccl.so.2");
    if (!nccl) {
      loaded = error(error_code::failed_precondition,
                     "NCCL (libnccl.so.2) cannot be loaded on this node: install it or add it to LD_LIBRARY_PATH");
      return;
    }
    auto* a = new nccl_api{std::move(*cuda), std::move(*nccl)};
    const bool driver = a->cuda.resolve(a->cu_init, "cuInit") && a->cuda.resolve(a->cu_device_count, "cuDeviceGetCount") &&
                        a->cuda.resolve(a->cu_device_get, "cuDeviceGet") &&
                        a->cuda.resolve(a->cu_primary_retain, "cuDevicePrimaryCtxRetain") &&
                        a->cuda.resolve(a->cu_primary_release, "cuDevicePrimaryCtxRelease_v2") &&
                        a->cuda.resolve(a->cu_ctx_set_current, "cuCtxSetCurrent") &&
                        a->cuda.resolve(a->cu_stream_create, "cuStreamCreate") &&
                        a->cuda.resolve(a->cu_stream_synchronize, "cuStreamSynchronize") &&
                        a->cuda.resolve(a->cu_stream_destroy, "cuStreamDestroy_v2");
    const bool collectives = a->nccl.resolve(a->get_unique_id, "ncclGetUniqueId") &&
                             a->nccl.resolve(a->comm_init_rank, "ncclCommInitRank") &&
                             a->nccl.resolve(a->comm_destroy, "ncclCommDestroy") &&
                             a->nccl.resolve(a->all_reduce, "ncclAllReduce") &&
                             a->nccl.resolve(a->broadcast, "ncclBroadcast") &&
                             a->nccl.resolve(a->get_error_string, "ncclGetErrorString");
    if (!driver || !collectives) {
      loaded = error(error_code::failed_precondition, std::string(driver ? "libnccl.so.2" : "libcuda.so.1") +
                                                        " lacks a function celer needs (too old a version?)");
      delete a;
      return;
    }
    if (a->cu_init(0) != 0) {
      loaded = error(error_code::failed_precondition, "the CUDA driver is installed but cuInit failed: no usable GPU");
      delete a;
      return;
    }
    loaded = a;
  });
  return loaded;
}

/// The api, checked for `device`: failed_precondition when there is no such device.
expected<const nccl_api*> api_for(int device) {
  auto api = load_nccl();
  if (!api) return api;
  int count = 0;
  if ((*api)->cu_device_count(&count) != 0 || device < 0 || device >= count) {
    return error(error_code::failed_precondition, "NCCL needs CUDA device " + std::to_string(device) + ", and this node has " +
                                                    std::to_string(count) + " device(s)");
  }
  return api;
}

/// What a join got: rank 0's NCCL unique id, or why not (code 0: joined).
struct nccl_join_result {
  std::uint8_t code = 0;
  std::string why;
  std::string unique_id;
  MSGPACK_DEFINE(code, why, unique_id)
};

/// Where the members of an NCCL group meet: rank 0 brings the unique id, every join returns
/// it once all `world_size` members have come. Runs `world_size` joins at once.
class nccl_rendezvous {
public:
  explicit nccl_rendezvous(int world_size) : joined_(static_cast<std::size_t>(world_size), false) {}

  nccl_join_result join(int world_size, int rank, std::string unique_id, std::int64_t timeout_ms) {
    auto refuse = [](error_code code, std::string why) {
      return nccl_join_result{static_cast<std::uint8_t>(code), std::move(why), {}};
    };
    std::unique_lock lock(mutex_);
    if (world_size != static_cast<int>(joined_.size())) {
      return refuse(error_code::invalid_argument, "the group has world_size " + std::to_string(joined_.size()) +
                                                    ", this member says " + std::to_string(world_size));
    }
    if (joined_[static_cast<std::size_t>(rank)]) {
      return refuse(error_code::already_exists, "rank " + std::to_string(rank) + " has joined already");
    }
    joined_[static_cast<std::size_t>(rank)] = true;
    ++count_;
    if (rank == 0) unique_id_ = std::move(unique_id);
    changed_.notify_all();
    const auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    if (!changed_.wait_until(lock, deadline, [&] { return count_ == joined_.size(); })) {
      return refuse(error_code::deadline_exceeded, std::to_string(count_) + " of " + std::to_string(joined_.size()) +
                                                     " members joined in " + std::to_string(timeout_ms) + " ms");
    }
    return {0, "", unique_id_};
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bool> joined_;
  std::size_t count_ = 0;
  std::string unique_id_;
};

nccl_rendezvous* make_nccl_rendezvous(int world_size) { return new nccl_rendezvous(world_size); }

int nccl_type(group::element e) {
  switch (e) {
    case group::element::f32: return nccl_float32;
    case group::element::f64: return nccl_float64;
    case group::element::i32: return nccl_int32;
    case group::element::i64: return nccl_int64;
    case group::element::u8: return nccl_uint8;
  }
  return nccl_uint8;
}

int nccl_op(op how) {
  switch (how) {
    case op::sum: return nccl_sum;
    case op::mean: return nccl_avg;
    case op::min: return nccl_min;
    case op::max: return nccl_max;
  }
  return nccl_sum;
}

} // namespace
} // namespace celer::collective

CELER_REMOTE(celer::collective::make_nccl_rendezvous, &celer::collective::nccl_rendezvous::join);

namespace celer::collective {

expected<void> nccl_available(int device) {
  auto api = api_for(device);
  if (!api) return api.error();
  return {};
}

struct nccl_group::impl {
  nccl_options o;
  const nccl_api* api = nullptr;
  actor_handle<nccl_rendezvous> meeting;
  cu_device device = 0;
  cu_context context = nullptr;
  nccl_comm comm = nullptr;
  nccl_stream stream = nullptr;

  ~impl() {
    if (api == nullptr || context == nullptr) return;
    (void)api->cu_ctx_set_current(context);
    if (comm != nullptr) (void)api->comm_destroy(comm);
    if (stream != nullptr) (void)api->cu_stream_destroy(stream);
    (void)api->cu_primary_release(device);
  }

  [[nodiscard]] error nccl_error(nccl_result r, const std::string& doing) const {
    return error(error_code::internal, "NCCL group " + o.name + ", rank " + std::to_string(o.rank) + ", " + doing +
                                         ": " + api->get_error_string(r));
  }
  /// Makes the device's context current on the calling thread (actors may move between
  /// threads), runs `call`, and waits for the stream.
  template <class Call>
  expected<void> run(const std::string& doing, Call call) {
    if (auto r = api->cu_ctx_set_current(context); r != 0) {
      return error(error_code::internal, "NCCL group " + o.name + ": cuCtxSetCurrent failed (" + std::to_string(r) + ")");
    }
    if (auto r = call(); r != 0) return nccl_error(r, doing);
    if (auto r = api->cu_stream_synchronize(stream); r != 0) {
      return error(error_code::internal, "NCCL group " + o.name + ", " + doing + ": the stream failed (CUDA error " +
                                           std::to_string(r) + ")");
    }
    return {};
  }
};

nccl_group::nccl_group(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
nccl_group::nccl_group(nccl_group&&) noexcept = default;
nccl_group& nccl_group::operator=(nccl_group&&) noexcept = default;

nccl_group::~nccl_group() {
  if (!impl_) return;
  if (impl_->o.rank == 0) {
    try {
      kill(impl_->meeting);
    } catch (const std::exception&) {  // the runtime is gone already: so is the actor
    }
  }
}

int nccl_group::rank() const noexcept { return impl_->o.rank; }
int nccl_group::size() const noexcept { return impl_->o.world_size; }

expected<nccl_group> nccl_group::join(nccl_options o) {
  if (o.name.empty()) return error(error_code::invalid_argument, "an NCCL group needs a name");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return error(error_code::invalid_argument, "rank " + std::to_string(o.rank) + " is outside world_size " +
                                                 std::to_string(o.world_size));
  }
  const std::string who = "joining NCCL group " + o.name + " as rank " + std::to_string(o.rank);
  auto api = api_for(o.device);
  if (!api) return error(api.error().code(), who + ": " + api.error().message());
  auto p = std::make_unique<impl>();
  p->o = o;
  p->api = *api;
  std::string id_bytes;
  if (o.rank == 0) {
    nccl_unique_id id{};
    if (auto r = p->api->get_unique_id(&id); r != 0) return p->nccl_error(r, "drawing the unique id");
    id_bytes.assign(id.internal, sizeof id.internal);
  }
  nccl_join_result joined;
  try {
    const std::string name = "celer.collective.nccl." + o.name;
    try {
      p->meeting = celer::actor(make_nccl_rendezvous)
                     .options({.name = name, .max_concurrency = o.world_size + 1})
                     .remote(o.world_size);
    } catch (const exception& e) {
      if (e.code() != error_code::already_exists) throw;
      p->meeting = celer::get_actor<nccl_rendezvous>(name);  // another member made it
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(o.timeout).count();
    joined = celer::get(p->meeting.task(&nccl_rendezvous::join).remote(o.world_size, o.rank, id_bytes, ms));
  } catch (const exception& e) {
    return error(e.code(), who + ": " + e.what());
  }
  if (joined.code != 0) return error(static_cast<error_code>(joined.code), who + ": " + joined.why);
  nccl_unique_id id{};
  if (joined.unique_id.size() != sizeof id.internal) {
    return error(error_code::internal, who + ": rank 0's unique id has " + std::to_string(joined.unique_id.size()) + " bytes");
  }
  std::memcpy(id.internal, joined.unique_id.data(), sizeof id.internal);
  auto& a = *p->api;
  if (a.cu_device_get(&p->device, o.device) != 0 || a.cu_primary_retain(&p->context, p->device) != 0 ||
      a.cu_ctx_set_current(p->context) != 0 || a.cu_stream_create(&p->stream, 0) != 0) {
    return error(error_code::failed_precondition, who + ": CUDA device " + std::to_string(o.device) + " cannot be used");
  }
  if (auto r = a.comm_init_rank(&p->comm, o.world_size, id, o.rank); r != 0) {
    p->comm = nullptr;
    return p->nccl_error(r, "making the communicator");
  }
  return nccl_group(std::move(p));
}

expected<void> nccl_group::allreduce_device(void* data, std::size_t count, group::element type, op how) {
  auto& g = *impl_;
  return g.run("allreduce", [&] {
    return g.api->all_reduce(data, data, count, nccl_type(type), nccl_op(how), g.comm, g.stream);
  });
}

expected<void> nccl_group::broadcast(void* device_data, std::size_t bytes, int root) {
  auto& g = *impl_;
  if (root < 0 || root >= g.o.world_size) {
    return error(error_code::invalid_argument, "broadcast root " + std::to_string(root) + " is outside the group");
  }
  return g.run("broadcast", [&] {
    return g.api->broadcast(device_data, device_data, bytes, nccl_uint8, root, g.comm, g.stream);
  });
}

} // namespace celer::collective
