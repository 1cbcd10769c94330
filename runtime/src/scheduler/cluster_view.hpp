#pragma once
// The cluster scheduler's policies over its view of the nodes: which node (and GPUs) a
// request goes to, or why it waits, or why it can never run. Plain logic with no I/O: the
// head drives it with what nodes report, and the scheduler tests and benchmarks drive it
// with simulated nodes.
//
//   cluster_view view;
//   view.add_node(id, total, labels, gpus);
//   auto d = view.place(need, placement);   // d.node, d.now, d.gpus, d.why, d.never
//
// A decision does not scan every node. Per request shape (amounts, GPU constraint, label
// selectors) the view caches which live nodes could ever run it, dropped whenever a node
// joins or dies; the live nodes are kept ordered by load, updated whenever a node's free
// amounts change. hybrid walks that order from the packing threshold (then from the least
// loaded) to the first candidate that fits, spread walks the candidates from its round-robin
// position, so both stop at the first fit; speed_weighted compares the candidates' expected
// finish from cached speeds and device masks, checking fits only for a new best. The answers
// are those of a full scan (tests/unit/runtime/scheduler_index_test.cpp checks that).

#include "protocol/placement.hpp"
#include "protocol/resources.hpp"
#include "scheduler/device_pool.hpp"

#include <celer/ids.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace celer::scheduling {

using protocol::node_bytes;

class cluster_view {
public:
  /// A node as the view books it. Read-only outside the view: its indexes follow every
  /// change it makes, so find() and nodes() hand out const nodes only.
  struct node {
    node_id id;
    protocol::resource_set total;
    /// Free as last reported, less what was placed here since.
    protocol::resource_set available;
    std::map<std::string, std::string> labels;
    device_pool gpus;
    /// Requests sent here that wait for resources, and the GPU units among them.
    std::uint32_t queued = 0;
    std::int64_t queued_gpus = 0;
    bool alive = true;
  };

  /// What place() decided.
  struct decision {
    /// Where the request goes (nil when it can never run anywhere).
    node_id target;
    /// Its resources are free there now (and were taken from the view); otherwise it
    /// waits in that node's queue.
    bool now = false;
    /// The devices taken, when now.
    std::vector<protocol::gpu_share> gpus;
    /// Why it waits, or why it can never run.
    std::string why;
    [[nodiscard]] bool never() const noexcept { return target.nil(); }
  };

  /// Load past which the hybrid policy stops packing a node and spreads (0..1: the share
  /// of its busiest resource in use).
  explicit cluster_view(double spread_threshold = 0.5);

  /// Adds a node, or replaces the one with the same id (it came back).
  node& add_node(const node_id& id, protocol::resource_set total,
                 std::map<std::string, std::string> labels, std::vector<gpu::device> gpus);
  /// The node stops receiving work.
  void mark_dead(const node_id& id);
  [[nodiscard]] const node* find(const node_id& id) const;
  [[nodiscard]] const std::vector<node>& nodes() const noexcept { return nodes_; }
  /// A node's report: what is free on it and how much waits there.
  void refresh(const node_id& id, const protocol::resource_set& available,
               const std::vector<std::int64_t>& gpu_free, std::uint32_t queued,
               std::int64_t queued_gpus);

  /// Chooses a node for `need` (amounts, GPU units included) under `p`. Free resources are
  /// taken from the view when the decision is `now`; a waiting request counts in its
  /// node's queue.
  decision place(const protocol::resource_set& need, const protocol::placement& p,
                 std::span<const node_bytes> locality = {});
  /// Why `need` under `p` cannot start now (or can never run), without placing it; "" when
  /// some node has room for it now.
  [[nodiscard]] std::string explain(const protocol::resource_set& need,
                                    const protocol::placement& p) const;
  /// What plan_group() decided: a node for each bundle (empty when not now), else why.
  struct group_plan {
    std::vector<node_id> nodes;
    std::string why;
    bool never = false;
  };
  /// Lays `bundles` over the nodes under `strategy` with what is free now, all or nothing;
  /// what it lays out is taken from the view (release() gives a bundle back).
  group_plan plan_group(const std::vector<protocol::bundle_spec>& bundles,
                        bundle_strategy strategy);
  /// Gives back what a `now` decision took (the work finished or went elsewhere).
  void release(const node_id& id, const protocol::resource_set& need,
               const std::vector<protocol::gpu_share>& gpus);
  /// A waiting request left `id`'s queue (it started, or was dropped).
  void dequeue(const node_id& id, const protocol::resource_set& need);

  /// An actor that opted in to preemption, as the head knows it.
  struct preemptible {
    node_id node;
    protocol::resource_set holds;
    std::vector<protocol::gpu_share> gpus;
    std::int32_t priority = 0;
    /// Larger for actors started later (stopping them loses the least work).
    std::uint64_t started = 0;
  };
  /// Replaces the preemptible actors the view weighs (those on nodes it does not know are
  /// left out): grouped by node and ordered here, once, not per choice. The head calls it
  /// when an actor that opted in starts or stops.
  void set_preemptible(std::span<const preemptible> actors);
  /// Where a waiting request of `priority` could start once some of the set_preemptible()
  /// actors (those of lower priority) stop: the node that needs the fewest stopped, then the
  /// lowest priorities among them (devices matched as place() does). The node agent there
  /// picks the actors itself, from what it knows at that moment.
  [[nodiscard]] std::optional<node_id> preemption_target(const protocol::resource_set& need,
                                                         const protocol::placement& p,
                                                         std::int32_t priority) const;
  /// The same over `actors`, grouped for this one call (for callers whose set changes
  /// from one choice to the next; the head keeps its set in the view instead).
  [[nodiscard]] std::optional<node_id> preemption_target(const protocol::resource_set& need,
                                                         const protocol::placement& p,
                                                         std::int32_t priority,
                                                         std::span<const preemptible> actors) const;
  /// A waiting request moves from `from`'s queue to `to`'s.
  void move_waiting(const node_id& from, const node_id& to, const protocol::resource_set& need);

  /// Whether `need` under `p` can run on `n` some day (never_on is "").
  [[nodiscard]] static bool could_run(const node& n, const protocol::resource_set& need,
                                      const protocol::placement& p);
  /// Why `need` under `p` can never run on `n`, "" when it can (given time).
  [[nodiscard]] static std::string never_on(const node& n, const protocol::resource_set& need,
                                            const protocol::placement& p);
  /// Whether `need` under `p` fits `n`'s free resources now.
  [[nodiscard]] static bool fits_now(const node& n, const protocol::resource_set& need,
                                     const protocol::placement& p);
  /// The share of `n`'s busiest resource in use: 0..1, or more when its report says more
  /// is in use than it has (available below zero).
  [[nodiscard]] static double load_of(const node& n);

private:
  /// The live nodes that could ever run one request shape (never_on is ""), cached per shape
  /// until a node joins or dies.
  struct candidates {
    /// Their slots (indices into nodes_), ascending, and the same as one bit per slot.
    std::vector<std::uint32_t> could;
    std::vector<std::uint64_t> bits;
    /// The request's amounts as (name id, amount), and its GPU units.
    std::vector<std::pair<std::uint32_t, std::int64_t>> need;
    std::int64_t units = 0;
    /// Per slot, for GPU requests: the sum of the accepted devices' speeds, and which of its
    /// devices are accepted (bit i: device i of its pool). A pool of more than 64 devices
    /// is `wide`: then device_pool's own per-device checks answer.
    std::vector<double> speed;
    std::vector<std::uint64_t> accepted;
    std::vector<bool> wide;
    /// The first few live nodes that refuse (their reasons are worded only if needed).
    std::vector<std::uint32_t> refusals;
    [[nodiscard]] bool has(std::size_t slot) const noexcept {
      return (bits[slot / 64] >> (slot % 64)) & 1U;
    }
  };
  /// The cached candidates for `need` under `p` (built on first use; the reference is good
  /// until the next call that changes the view or the cache).
  const candidates& candidates_for(const protocol::resource_set& need,
                                   const protocol::placement& p) const;
  /// A node's free amounts (or liveness) changed: its place in by_load_ and its row in
  /// free_units_ follow.
  void reindex(std::size_t slot);
  /// The id of a resource name in free_units_' rows (a new one is added).
  std::uint32_t name_id(const std::string& name) const;
  /// fits_now() for a candidate of `c`, from the view's dense rows and cached device masks.
  [[nodiscard]] bool fits(std::size_t slot, const candidates& c, const protocol::placement& p) const;
  /// Units in use on the devices the candidate at `slot` accepts.
  std::int64_t busy_at(const candidates& c, std::size_t slot, const protocol::placement& p) const;
  /// Nodes joined or died: every cached candidate list is stale.
  void forget_shapes() noexcept { shapes_.clear(); }
  /// Why nothing can ever run it, from candidates with nothing in `could`.
  std::string never_text(const candidates& c, const protocol::resource_set& need,
                         const protocol::placement& p) const;
  /// node_affinity's answer, when it has one (hard always does; soft only when it fits).
  std::optional<decision> place_on_node(const protocol::resource_set& need,
                                        const protocol::placement& p);
  /// Takes `need` on `n` (a copy, or a node of the view: then reindex() it).
  static decision take(node& n, const protocol::resource_set& need, const protocol::placement& p);
  /// take() on the view's node at `slot`, its index kept.
  decision take_at(std::size_t slot, const protocol::resource_set& need,
                   const protocol::placement& p);
  decision enqueue(node& n, const protocol::resource_set& need, std::string why);
  /// The slot of the node the policy prefers among the candidates where `need` fits now,
  /// or nodes_.size() when it fits on none of them.
  std::size_t choose(const candidates& c, const protocol::resource_set& need,
                     const protocol::placement& p, std::span<const node_bytes> locality);
  std::size_t choose_hybrid(const candidates& c, const protocol::resource_set& need,
                            const protocol::placement& p, std::span<const node_bytes> locality) const;
  /// hybrid within one of by_load_'s sets: the busiest candidate that fits under the
  /// threshold, else the least loaded that fits (the lowest slot on equal loads).
  std::size_t pack_or_spread(const std::set<std::pair<double, std::uint32_t>>& by_load,
                             const candidates& c, const protocol::placement& p) const;
  std::size_t choose_spread(const candidates& c, const protocol::placement& p) const;
  std::size_t choose_by_speed(const candidates& c, const protocol::placement& p) const;
  /// Where `need` waits when it fits nowhere now.
  std::size_t choose_wait(const candidates& c, const protocol::placement& p) const;
  /// The node at `slot`'s queue, devices or total changed: its row in rows_ follows.
  void sync_row(std::size_t slot);
  std::string why_waiting(const std::vector<std::uint32_t>& could, const protocol::resource_set& need,
                          const protocol::placement& p) const;

  /// The preemptible actors grouped by node: `victims` ordered by slot, then lowest
  /// priority first, then the latest started; their amounts flattened over `names`.
  struct victim_groups {
    struct victim {
      std::int32_t priority = 0;
      std::uint64_t started = 0;
      /// Their GPU shares: shares[first_share, first_share + share_count).
      std::uint32_t first_share = 0, share_count = 0;
    };
    struct group {
      std::uint32_t slot = 0, first = 0, count = 0;  ///< victims[first, first + count)
    };
    std::vector<std::string> names;
    std::vector<victim> victims;
    std::vector<std::int64_t> holds;  ///< victims.size() x names.size()
    std::vector<protocol::gpu_share> shares;
    std::vector<group> groups;
  };
  victim_groups group_victims(std::span<const preemptible> actors) const;
  std::optional<node_id> preemption_target(const protocol::resource_set& need,
                                           const protocol::placement& p, std::int32_t priority,
                                           const victim_groups& g) const;

  double spread_threshold_;
  std::vector<node> nodes_;
  std::unordered_map<node_id, std::size_t> index_;
  /// spread's round-robin position.
  std::size_t next_ = 0;
  std::size_t alive_ = 0;
  /// The live nodes as (load, slot): [0] those without GPUs, [1] those with.
  std::set<std::pair<double, std::uint32_t>> by_load_[2];
  /// Per slot, its key in by_load_ (when `indexed`).
  struct load_key {
    double load = 0;
    std::uint8_t set = 0;
    bool indexed = false;
  };
  std::vector<load_key> keys_;
  /// Per slot, its free amounts by name id (names_), kept with `available`: a decision
  /// compares a few integers instead of looking names up in maps.
  std::vector<std::vector<std::int64_t>> free_units_;
  /// Per slot, for the choices that compare every candidate (speed_weighted, and where to
  /// wait): requests waiting, GPU units waiting, CPU units in all, then each device's free
  /// units, row_size_ values a slot in one array, so that such a walk reads memory in order.
  std::vector<std::int64_t> rows_;
  std::size_t row_size_ = 3;
  mutable std::vector<std::string> names_;
  mutable std::unordered_map<std::string, std::uint32_t> name_ids_;
  /// Candidates per request shape (a key made of the amounts, GPU constraint and labels).
  mutable std::unordered_map<std::string, candidates> shapes_;
  mutable std::string key_;  ///< the last shape's key (its buffer reused)
  victim_groups preemptible_;
};

/// Which of `count` candidates, in the order they should go, to stop so that there is room
/// (`room(chosen)`, chosen a std::vector<bool>): the first ones that together make room,
/// less any among them not needed after all (one holding a device the request cannot
/// use). All false when even all of them do not.
template <class Room>
[[nodiscard]] std::vector<bool> pick_victims(std::size_t count, Room&& room) {
  std::vector<bool> chosen(count, false);
  std::size_t last = count;
  for (std::size_t i = 0; i < count; ++i) {
    chosen[i] = true;
    if (room(chosen)) {
      last = i;
      break;
    }
  }
  if (last == count) return std::vector<bool>(count, false);
  for (std::size_t i = last; i-- > 0;) {
    chosen[i] = false;
    if (!room(chosen)) chosen[i] = true;
  }
  return chosen;
}

} // namespace celer::scheduling
