#pragma once
// The cluster scheduler's policies over its view of the nodes: which node (and GPUs) a
// request goes to, or why it waits, or why it can never run. Plain logic with no I/O: the
// head drives it with what nodes report, and the scheduler tests and benchmarks drive it
// with simulated nodes.
//
//   cluster_view view;
//   view.add_node(id, total, labels, gpus);
//   auto d = view.place(need, placement);   // d.node, d.now, d.gpus, d.why, d.never

#include "protocol/placement.hpp"
#include "protocol/resources.hpp"
#include "scheduler/device_pool.hpp"

#include <celer/ids.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace celer::scheduling {

using protocol::node_bytes;

class cluster_view {
public:
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
  [[nodiscard]] node* find(const node_id& id);
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
  /// Where a waiting request of `priority` could start once some of `actors` (those of
  /// lower priority) stop: the node that needs the fewest stopped, then the lowest
  /// priorities among them (devices matched as place() does). The node agent there picks
  /// the actors itself, from what it knows at that moment.
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
  /// The live nodes (indices into nodes_) that can run a request some day (`could`), those
  /// with room now (`fit`), and the first few refusals with their reasons.
  struct survey {
    std::vector<std::size_t> could, fit;
    /// The first few nodes that refused (their reasons are worded only if needed).
    std::vector<std::size_t> refusals;
    std::size_t alive = 0;
  };
  survey look(const protocol::resource_set& need, const protocol::placement& p) const;
  /// Why nothing can ever run it, from a survey with nothing in `could`.
  std::string never_text(const survey& s, const protocol::resource_set& need,
                         const protocol::placement& p) const;
  /// node_affinity's answer, when it has one (hard always does; soft only when it fits).
  std::optional<decision> place_on_node(const protocol::resource_set& need,
                                        const protocol::placement& p);
  decision take(node& n, const protocol::resource_set& need, const protocol::placement& p);
  decision enqueue(node& n, const protocol::resource_set& need, std::string why);
  /// Among the nodes where `need` fits now (`fit`, never empty: aborts otherwise), the one
  /// the policy prefers. Always one of them, whatever their loads (a report can put a
  /// node's load past 1).
  node& choose(const std::vector<node*>& fit, const protocol::resource_set& need,
               const protocol::placement& p, std::span<const node_bytes> locality);
  node& choose_hybrid(const std::vector<node*>& fit, const protocol::resource_set& need,
                      std::span<const node_bytes> locality);
  /// How long `need` would wait on `n` relative to its size: the work ahead of it on the
  /// resource it needs most (GPUs, else CPUs) over that resource's total.
  [[nodiscard]] static double backlog(const node& n, const protocol::resource_set& need,
                                      const protocol::placement& p);
  /// Expected finish of `need`'s GPU work on `n`: (busy + queued + need) / speed.
  [[nodiscard]] static double expected_finish(const node& n, const protocol::resource_set& need,
                                              const protocol::placement& p);
  std::string why_waiting(const std::vector<std::size_t>& could, const protocol::resource_set& need,
                          const protocol::placement& p) const;

  double spread_threshold_;
  std::vector<node> nodes_;
  std::unordered_map<node_id, std::size_t> index_;
  /// spread's round-robin position.
  std::size_t next_ = 0;
};

/// Which of `count` candidates, in the order they should go, to stop so that `room` holds:
/// the first ones that together make room, less any among them not needed after all (one
/// holding a device the request cannot use). All false when even all of them do not.
[[nodiscard]] std::vector<bool> pick_victims(
  std::size_t count, const std::function<bool(const std::vector<bool>&)>& room);

} // namespace celer::scheduling
