#pragma once
/// Collectives for groups of actors: allreduce, broadcast, allgather and barrier over a ring,
/// on CPUs, through celer's own transport (<celer/peer.hpp>: between processes of one
/// machine a ring of shared memory, one copy and no encryption; between machines bulk frames
/// on the job's encrypted connections, no msgpack copy of the data).
///
///   // In each of 4 trainer actors (any process, any node), rank r:
///   auto g = celer::collective::group::join({.name = "trainers", .world_size = 4, .rank = r});
///   if (!g) return g.error();
///   std::vector<float> grads = ...;                       // this worker's gradients
///   if (auto ok = g->allreduce(std::span(grads), celer::collective::op::mean); !ok) ...
///   (void)g->broadcast(std::span(weights), /*root=*/0);   // everyone gets rank 0's
///   auto all = g->allgather(std::span(mine));             // the ranks' blocks, in rank order
///   (void)g->barrier();
///
/// Contracts, as NCCL's and gloo's: every member calls the same collectives in the same order
/// with the same sizes (and root); a member that does not come (dead, or a different call)
/// makes the others fail with deadline_exceeded after `timeout`, naming the rank they waited
/// for, and the group is then broken: every later call fails until its members join again.
/// Members meet through a named actor (`celer.collective.<name>`), created by whichever
/// member comes first; it lives until the group's rank 0 leaves. The allreduce is a ring:
/// reduce-scatter then allgather, each member sending 2(n-1)/n of the data and receiving as
/// much, in pieces of `chunk_bytes` so that sending, receiving and adding overlap.
///
/// Hierarchical allreduce (`hierarchy`): the members are split into local groups, by node or
/// by a label each member gives; allreduce then runs a ring in each local group, a ring among
/// the local groups' leaders (each group's lowest rank), and a broadcast from each leader to
/// its group. Across nodes only the leaders send, 2(g-1)/g of the data for g groups. Local
/// groups are ordered by their lowest rank and their members by rank: the order of the sums
/// is fixed, and every member ends with the same bits (not always the flat ring's bits for
/// floats, whose sums depend on their order). Broadcast, allgather and barrier use the ring
/// of all members.
/// A supervisor that learns a member died need not wait for the timeout: `abort` (from any
/// thread of a member's process) makes that member's call in progress fail at once.

#include <celer/error.hpp>
#include <celer/peer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace celer::collective {

/// How allreduce combines the members' values, element by element.
enum class op { sum, mean, min, max };

/// How allreduce groups the members (see the header's summary).
enum class grouping {
  /// One ring of all members.
  none,
  /// The members on one node form a local group.
  by_node,
  /// The members that give the same `local_group` form one (e.g. a rack or zone label).
  by_label,
};

struct group_options {
  /// The group's name, the same in every member; one group of this name at a time.
  std::string name;
  int world_size = 0;
  /// This member's rank, 0 .. world_size-1, each taken by exactly one member.
  int rank = -1;
  /// How long a call waits for a peer (joining included) before the group is broken.
  std::chrono::nanoseconds timeout = std::chrono::seconds(120);
  /// The largest piece sent in one message (at most celer::peer::max_payload): pieces
  /// pipeline the ring.
  std::size_t chunk_bytes = std::size_t{4} << 20;
  /// Local groups for allreduce; the same in every member.
  grouping hierarchy = grouping::none;
  /// With grouping::by_label: this member's local group (any non-empty string).
  std::string local_group;
};

/// The error feedback of group::allreduce_sign for one tensor: what this member has not sent
/// yet of its own values, and of the part of the sum it owns. One per tensor and member, kept
/// from step to step (it sizes itself at the first call). Not thread-safe: one owner.
class sign_feedback {
public:
  sign_feedback();
  sign_feedback(sign_feedback&&) noexcept;
  sign_feedback& operator=(sign_feedback&&) noexcept;
  ~sign_feedback();
  /// Forgets the residuals (e.g. after loading weights from a checkpoint or a peer).
  void reset() noexcept;

  /// The residuals and their compressors (internal).
  struct state;
  [[nodiscard]] state& internal() noexcept { return *state_; }

private:
  std::unique_ptr<state> state_;
};

/// What one member has done (for the metrics the apps print: bytes sent per step).
struct group_counters {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t operations = 0;
};

class group {
public:
  /// Joins the group: registers this process's endpoint under `rank` with the group's
  /// rendezvous actor, and returns once all `world_size` members have (or at `timeout`,
  /// deadline_exceeded saying how many came). invalid_argument for an empty name, a
  /// world_size below 1 or a rank outside it, a chunk_bytes of 0 or over
  /// celer::peer::max_payload, by_label without a local_group, or members asking for
  /// different hierarchies; already_exists when another
  /// member holds the rank. Needs celer::init (embedded or a cluster).
  [[nodiscard]] static expected<group> join(group_options options);

  group(group&&) noexcept;
  group& operator=(group&&) noexcept;
  /// Leaves the group (rank 0 stops the rendezvous actor once the others have left).
  ~group();

  [[nodiscard]] int rank() const noexcept;
  [[nodiscard]] int size() const noexcept;
  [[nodiscard]] group_counters counters() const noexcept;
  /// The members of this member's local group (all of them without a hierarchy).
  [[nodiscard]] int local_size() const noexcept;

  /// Every member's `data` becomes the element-wise `how` of all members' `data` (the same
  /// size everywhere). Sums are added in the ring's order (with a hierarchy: in the local
  /// ring's, then the leaders'), which is the same for every element position on every
  /// member: all members end with the same bits.
  template <class T>
  [[nodiscard]] expected<void> allreduce(std::span<T> data, op how = op::sum) {
    static_assert(std::is_arithmetic_v<T>, "allreduce takes numbers");
    return allreduce_bytes(data.data(), data.size(), element_of<T>(), how);
  }
  /// Every member's `data` becomes `root`'s.
  template <class T>
  [[nodiscard]] expected<void> broadcast(std::span<T> data, int root) {
    static_assert(std::is_trivially_copyable_v<T>);
    return broadcast_bytes(data.data(), data.size_bytes(), root);
  }
  /// Every member's `mine` (the same size everywhere), concatenated in rank order.
  template <class T>
  [[nodiscard]] expected<std::vector<T>> allgather(std::span<const T> mine) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> out(mine.size() * static_cast<std::size_t>(size()));
    if (auto ok = allgather_bytes(mine.data(), mine.size_bytes(), out.data()); !ok) return ok.error();
    return out;
  }
  /// Returns once every member has called it.
  [[nodiscard]] expected<void> barrier();

  /// Every member's `data` becomes about the mean of all members' `data`, sent as one bit a
  /// value plus a float32 scale per `block_size` values (1-bit SGD / 1-bit Adam's compressed
  /// allreduce): each member compresses part p of its values (with its error feedback) and
  /// sends it to member p; member p decodes the n pieces, averages them in rank order,
  /// compresses the average (with its own error feedback for that part) and sends it to
  /// everyone, who decode it. Each member sends 2(n-1)/n of the compressed data: ~31x fewer
  /// bytes than allreduce for block_size 1,024. Every member ends with the same bits (the
  /// decoded averages). What a step does not send stays in `feedback` and goes with the next
  /// step's values, so over many steps nothing is lost. invalid_argument (this member only;
  /// the others then time out) for fewer values than members, a block_size of 0, a size or
  /// block_size other than `feedback` was first used with, or a value that is not finite.
  [[nodiscard]] expected<void> allreduce_sign(std::span<float> data, sign_feedback& feedback,
                                              std::size_t block_size = 1024);
  /// Gives up: the collective this member is in (waiting for a peer) fails within a few
  /// milliseconds with `cancelled`, naming `reason`, instead of at `timeout`, and the group
  /// is broken (every later call fails; its members must join a new group). Thread-safe:
  /// for another thread of this member's process (an actor call handled concurrently, when
  /// the driver learned that a peer died). Aborting twice keeps the first reason.
  void abort(const std::string& reason);

  /// The element types allreduce adds (internal).
  enum class element : std::uint8_t { f32, f64, i32, i64, u8 };
  /// The element type of T (internal; nccl_group uses it too).
  template <class T>
  static constexpr element element_of() {
    if constexpr (std::is_same_v<T, float>) return element::f32;
    else if constexpr (std::is_same_v<T, double>) return element::f64;
    else if constexpr (std::is_same_v<T, std::int32_t>) return element::i32;
    else if constexpr (std::is_same_v<T, std::int64_t>) return element::i64;
    else {
      static_assert(std::is_same_v<T, std::uint8_t>, "allreduce takes float, double, int32, int64 or uint8");
      return element::u8;
    }
  }

private:
  struct impl;
  explicit group(std::unique_ptr<impl> p);

  expected<void> allreduce_bytes(void* data, std::size_t count, element type, op how);
  expected<void> broadcast_bytes(void* data, std::size_t bytes, int root);
  expected<void> allgather_bytes(const void* mine, std::size_t bytes, void* out);

  std::unique_ptr<impl> impl_;
};

} // namespace celer::collective
