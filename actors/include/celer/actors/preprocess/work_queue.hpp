#pragma once
/// Which worker processes which block next: the shared queue behind celer-preprocess's
/// workers, with work stealing and dynamic re-sharding. Pure policy (no runtime calls, no
/// clock, no threads): the caller reports what happened and asks what to do, so a test or a
/// benchmark drives it with made-up timings.
///
///   namespace pp = celer::preprocess;
///   pp::work_queue q(costs, {"w0", "w1", "w2"}, {.policy = pp::queue_policy::steal});
///   while (auto b = q.take("w1")) {       // w1's own blocks first, then the slowest's
///     ... process block *b, taking `seconds` ...
///     q.done("w1", *b, seconds);           // false: someone else finished it first
///   }
///   q.fail("w2");                          // w2 died: its blocks, running ones included,
///                                          // go to whoever asks next
///
/// Each block starts in one worker's queue: the owner of "block-<index>" on a consistent-hash
/// ring of the workers (sharding.hpp), so the same blocks go to the same workers run after
/// run, and a worker removed moves only its own blocks. Three policies:
/// - `fixed` (static partitioning): a worker takes only from its own queue. A dead worker's
///   blocks go to the owners the ring gives them without it.
/// - `steal`: a worker whose queue is empty takes the last block of the queue that will take
///   longest to finish (its blocks' cost times its owner's measured seconds per unit of cost).
///   When nothing is queued anywhere, an idle worker runs a backup copy of a block another
///   worker holds (the slowest's first, or one never heard from): the first copy to finish
///   counts and the other is dropped, so a stalled or unplaced worker cannot hold the run's
///   last blocks (MapReduce's backup tasks).
/// - `reshard`: `steal`, plus every `reshard_every` completions the queued blocks are dealt
///   again in proportion to each worker's measured speed, so a worker that fell behind
///   keeps only what it can finish when the others do.
/// Block costs are any positive measure of work (bytes of input, items); speeds are learnt
/// from done() as an exponentially weighted mean of seconds per unit of cost.
#include <celer/actors/preprocess/sharding.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace celer::preprocess {

enum class queue_policy { fixed, steal, reshard };

/// "fixed", "steal", "reshard"; the name of a policy, and back (invalid_argument).
[[nodiscard]] std::string_view queue_policy_name(queue_policy p) noexcept;
[[nodiscard]] expected<queue_policy> parse_queue_policy(std::string_view name);

struct work_queue_options {
  queue_policy policy = queue_policy::steal;
  /// Re-deal the queued blocks after this many completions (reshard only)...
  std::size_t reshard_every = 16;
  /// ... when the workers' expected finishing times differ by more than this fraction of
  /// the latest (so that measurement noise does not move blocks back and forth).
  double reshard_imbalance = 0.1;
  /// Weight of the newest block in a worker's speed (0 < alpha <= 1).
  double speed_alpha = 0.3;
  /// Virtual nodes per worker on the ring that deals the first blocks.
  std::uint32_t virtual_nodes = 160;
};

/// What the queue did, for the progress line, the report and the benchmarks.
struct work_queue_stats {
  std::size_t blocks = 0, done = 0, running = 0, queued = 0;
  /// Blocks taken from another worker's queue (steal, reshard).
  std::size_t stolen = 0;
  /// Blocks moved between queues by re-sharding, and how many times it ran.
  std::size_t resharded = 0, reshards = 0;
  /// Blocks that went back to the queue because their worker failed.
  std::size_t requeued = 0;
  /// Results that came for a block already done (ignored).
  std::size_t duplicates = 0;
  /// Backup copies of blocks other workers held, started by idle workers at the end.
  std::size_t backups = 0;
};

class work_queue {
public:
  /// `costs[i]` is block i's cost (> 0); `workers` are unique names. invalid_argument for
  /// no workers, a repeated or empty name, a cost that is not a positive finite number, or
  /// options out of range.
  [[nodiscard]] static expected<work_queue> make(std::vector<double> costs,
                                                 std::vector<std::string> workers,
                                                 work_queue_options options = {});

  /// The next block for `worker`, now counted as running there; std::nullopt when it has
  /// nothing to do under the policy (which does not mean every block is done: see
  /// finished()). A dead or unknown worker gets nothing.
  [[nodiscard]] std::optional<std::uint64_t> take(std::string_view worker);

  /// `worker` finished `block` in `seconds`. True the first time a block is done; false for
  /// a block already done (a result that arrives after its worker was given up on and the
  /// block ran elsewhere): the caller drops that result.
  bool done(std::string_view worker, std::uint64_t block, double seconds);

  /// `worker` stopped without finishing `block` (its call failed): the block goes to the
  /// front of the queue it is dealt to now.
  void give_back(std::string_view worker, std::uint64_t block);

  /// `worker` is gone: its running and queued blocks go back to be dealt again (fixed:
  /// onto the ring without it; steal and reshard: to whoever asks first). Returns how many.
  std::size_t fail(std::string_view worker);

  /// `worker` (dead, or new) takes part again, with an empty queue.
  void revive(std::string_view worker);

  /// Every block is done.
  [[nodiscard]] bool finished() const noexcept { return done_count_ == blocks_.size(); }
  [[nodiscard]] work_queue_stats stats() const;
  /// Blocks queued for `worker` now, and its measured seconds per unit of cost (0: unknown).
  [[nodiscard]] std::size_t queued(std::string_view worker) const;
  [[nodiscard]] double seconds_per_cost(std::string_view worker) const;
  /// Blocks each worker finished.
  [[nodiscard]] std::map<std::string, std::size_t> done_by_worker() const;

private:
  struct block_state {
    double cost = 0;
    bool done = false;
    int running = 0;  // how many workers hold it now (more than one only after a failure)
  };
  struct worker_state {
    std::string name;
    bool alive = true;
    std::deque<std::uint64_t> queue;
    std::vector<std::uint64_t> running;
    double seconds_per_cost = 0;  // 0 until the first done()
    std::size_t done = 0;
  };

  work_queue() = default;
  worker_state* find(std::string_view name);
  const worker_state* find(std::string_view name) const;
  /// The live worker `block` is dealt to on the ring of live workers.
  worker_state* owner_of(std::uint64_t block);
  [[nodiscard]] double expected_seconds(const worker_state& w) const;
  [[nodiscard]] double typical_seconds_per_cost() const;
  void reshard();
  void requeue(std::uint64_t block, bool front);

  work_queue_options options_;
  /// The live workers, for dealing blocks.
  hash_ring ring_;
  std::vector<block_state> blocks_;
  std::vector<worker_state> workers_;
  /// Blocks of failed workers waiting for anyone (steal and reshard).
  std::deque<std::uint64_t> orphans_;
  std::size_t done_count_ = 0, since_reshard_ = 0;
  work_queue_stats counters_;
};

} // namespace celer::preprocess
