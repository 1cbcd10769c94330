#pragma once
/// Allreduce and broadcast of GPU memory through NCCL, for a group of actors each driving one
/// CUDA device: the sibling of celer::collective::group (<celer/actors/collective.hpp>) for
/// data that lives on devices. NCCL and the CUDA driver are loaded at run time (dlopen of
/// libnccl.so.2 and libcuda.so.1), so celer builds and runs without them; joining without
/// them fails with failed_precondition naming what is missing.
///
///   // In each of 2 trainer actors, rank r, holding `count` floats at device address `grads`:
///   auto g = celer::collective::nccl_group::join({.name = "trainers", .world_size = 2, .rank = r,
///                                                 .device = r});
///   if (!g) return g.error();                                // e.g. no GPU on this node
///   if (auto ok = g->allreduce(grads, count, celer::collective::op::mean); !ok) ...
///
/// Contracts: those of NCCL. Every member calls the same collectives in the same order with
/// the same counts; one device per member (NCCL refuses two ranks on one device); the calls
/// block until the device has finished (they run on a stream of the group's and wait for it).
/// The members exchange NCCL's unique id through a named actor (`celer.collective.nccl.<name>`)
/// made by whichever member comes first: rank 0 draws the id, the others take it from there.
/// Errors are NCCL's and the driver's, with their strings; after one the group should be
/// joined again. Sums follow NCCL's algorithm (the same bits on every member for one run).

#include <celer/actors/collective.hpp>
#include <celer/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace celer::collective {

struct nccl_options {
  /// The group's name, the same in every member; one group of this name at a time.
  std::string name;
  int world_size = 0;
  /// This member's rank, 0 .. world_size-1.
  int rank = -1;
  /// The CUDA device (its index on this node) this member's data lives on.
  int device = 0;
  /// How long joining waits for the other members at the rendezvous.
  std::chrono::nanoseconds timeout = std::chrono::seconds(120);
};

/// Whether this process can join an NCCL group on `device`: ok, or failed_precondition naming
/// what is missing (the CUDA driver, a device, libnccl.so.2).
[[nodiscard]] expected<void> nccl_available(int device = 0);

class nccl_group {
public:
  /// Joins: checks the driver, the device and NCCL (failed_precondition naming what is
  /// missing), meets the other members (deadline_exceeded after `timeout`), and makes the
  /// NCCL communicator. invalid_argument for an empty name or a rank outside world_size.
  /// Needs celer::init (embedded or a cluster).
  [[nodiscard]] static expected<nccl_group> join(nccl_options options);

  nccl_group(nccl_group&&) noexcept;
  nccl_group& operator=(nccl_group&&) noexcept;
  /// Destroys the communicator and the stream (rank 0 also stops the rendezvous actor).
  ~nccl_group();

  [[nodiscard]] int rank() const noexcept;
  [[nodiscard]] int size() const noexcept;

  /// The `count` elements at device address `device_data` become the element-wise `how` of
  /// all members' (NCCL's ncclAllReduce, in place; op::mean is ncclAvg).
  template <class T>
  [[nodiscard]] expected<void> allreduce(T* device_data, std::size_t count, op how = op::sum) {
    return allreduce_device(device_data, count, group::element_of<T>(), how);
  }
  /// The `bytes` bytes at device address `device_data` become `root`'s.
  [[nodiscard]] expected<void> broadcast(void* device_data, std::size_t bytes, int root);

private:
  struct impl;
  explicit nccl_group(std::unique_ptr<impl> p);
  expected<void> allreduce_device(void* data, std::size_t count, group::element type, op how);
  std::unique_ptr<impl> impl_;
};

} // namespace celer::collective
