#pragma once
// A trainer worker is a celer actor holding one model replica, its optimiser and its shard of
// the training data (a data_loader over shard_order(rank, world, seed)). The workers of a run
// form a celer::collective group and train by synchronous data parallelism: each step, every
// worker computes the gradients of its own micro-batches, the group averages them with one
// allreduce, and every replica takes the same optimiser step, so the replicas stay equal.
// After enter_async (mode async, or hybrid's switch) each step instead pushes the worker's
// gradient to the parameter servers (<celer/actors/parameter_server.hpp>), which apply the
// optimiser, and pulls the weights they hold; finish_async pulls the final ones.
//
//   auto w = celer::actor(make_trainer_worker).options({.num_cpus = 1}).remote(spec);
//   celer::get(w.task(&trainer_worker::start).remote());        // every worker at once: joins
//   auto figures = celer::get(w.task(&trainer_worker::run_steps).remote(10));
//   auto val = celer::get(w.task(&trainer_worker::evaluate).remote());   // rank 0 does it
//
// This header names no LibTorch type (the replica lives behind a pointer), so the driver
// compiles without LibTorch's headers; worker.cpp is the one file that includes them.
#include <celer/actors/checkpoint.hpp>
#include <celer/actors/parameter_server.hpp>
#include <celer/celer.hpp>
#include <celer/codec.hpp>

#include "config.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

// train_config travels as a map from each key's name to its value, by config_keys() (no key
// spelt here): a key a worker does not know is skipped, one the driver did not send keeps
// its default.
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <>
struct pack<celer::train_app::train_config> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::train_app::train_config& c) const {
    const auto& keys = celer::train_app::config_keys();
    o.pack_map(static_cast<std::uint32_t>(keys.keys().size()));
    keys.visit(c, [&](std::string_view key, const auto& value) {
      o.pack(key);
      o.pack(value);
    });
    return o;
  }
};

template <>
struct convert<celer::train_app::train_config> {
  const msgpack::object& operator()(const msgpack::object& o, celer::train_app::train_config& c) const {
    if (o.type != msgpack::type::MAP) throw msgpack::type_error();
    celer::train_app::config_keys().visit(c, [&](std::string_view key, auto& value) {
      for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
        const auto& kv = o.via.map.ptr[i];
        if (kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key) {
          kv.val.convert(value);
          return;
        }
      }
    });
    return o;
  }
};

} // namespace adaptor
} // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
} // namespace msgpack

namespace celer::train_app {

/// What a worker is made from: the factory's one argument. The run's configuration goes
/// whole (every key, as config_keys() declares it: a new key reaches the workers with no
/// line here); the rest is what differs between workers or is derived from the keys.
struct worker_spec {
  int rank = 0;
  int world = 1;
  /// The collective group's name (one per run).
  std::string group;
  /// The run's configuration (config.hpp).
  train_config config;
  /// This worker's local group (hierarchy by_label: config.local_groups[rank]).
  std::string local_group;
  /// sharding speed: every worker's micro-batch, in rank order (empty: batch_size each).
  /// Worker r draws batch_split[r] samples a micro-batch from a shard in proportion to it
  /// (the weighted shard_order), and weighs its gradient by world x batch_split[r] / sum,
  /// so the allreduce's mean is the mean over every sample of the step.
  std::vector<std::int64_t> batch_split;
  /// Busy ms added to each batch: config.loader_cost_ms, or a test's slow worker's
  /// (CELER_TRAIN_SLOW_WORKER).
  double loader_cost_ms = 0;
  /// torch::set_num_threads: cpus_per_worker rounded, at least 1.
  int threads = 1;
  /// How long a collective waits for a peer (collective_timeout_s).
  std::int64_t timeout_ms = 120'000;
  /// For tests (CELER_TRAIN_INJECT_OVERFLOW=RANK:STEP): this worker's gradient holds an inf
  /// at this step (0: never).
  std::int64_t overflow_at_step = 0;
  /// For tests and benchmarks (CELER_TRAIN_WORKER_SPEED=RANK:FRACTION): this worker computes
  /// at this fraction of its speed (after each forward and backward pass it spins for the
  /// time the pass took x (1 / fraction - 1)), as a slower device would. 1: full speed.
  double speed_fraction = 1;
  /// ...from this step on (0: from the start, measure_speed included).
  std::int64_t speed_from_step = 0;
  /// For tests (CELER_TRAIN_INJECT_FAILURE=RANK:STEP): this worker throws as it begins this
  /// step (0: never).
  std::int64_t fail_at_step = 0;
  /// ...RANK:STEP:exit: its worker process exits instead, when it is not the driver's (a
  /// cluster): a trainer killed mid-run.
  bool fail_by_exit = false;
  std::int64_t driver_pid = 0;
  MSGPACK_DEFINE(rank, world, group, config, local_group, batch_split, loader_cost_ms, threads, timeout_ms,
                 overflow_at_step, speed_fraction, speed_from_step, fail_at_step, fail_by_exit, driver_pid)
};

/// One step's figures on one worker.
struct step_figures {
  std::int64_t step = 0;
  /// Mean cross-entropy over this worker's predictions of the step, before the update (a
  /// classifier predicts once a sample, the transformer once a character of its windows).
  double loss = 0;
  /// Predictions right, and predictions made (samples, or samples x context for text).
  std::int64_t correct = 0;
  std::int64_t predictions = 0;
  std::int64_t samples = 0;
  /// The samples a full step of this worker draws: batch_size x accumulate_steps (x the
  /// noise_scale policy's multiplier); `samples` is less when an epoch's last batch is short.
  std::int64_t batch_size = 0;
  /// Blocked waiting for the loader's next batch.
  double data_wait_seconds = 0;
  /// Forward, backward, flattening and the optimiser step.
  double compute_seconds = 0;
  /// In the allreduce (waiting for the slowest peer included).
  double allreduce_seconds = 0;
  /// Bytes this worker sent to its peers during the step (the group's counters).
  std::uint64_t bytes_sent = 0;
  /// The L2 norm of the averaged gradient (before clipping); async: of this worker's own.
  double grad_norm = 0;
  /// async: the push/pull is in allreduce_seconds; of it, the time the servers held this
  /// worker at the staleness bound, and how many steps ahead of the slowest worker it was
  /// when it pulled (at most the staleness).
  double bound_wait_seconds = 0;
  std::int64_t ahead = 0;
  /// The step's wall time on this worker.
  double step_seconds = 0;
  /// batch_size_policy noise_scale: the estimate B_simple after this step (the same on every
  /// worker: it comes from allreduced norms); -1 while there is none, or with the fixed policy.
  double noise_scale = -1;
  /// The learning rate this step's optimiser step used (batch_size_lr_scaling moves it).
  double lr = 0;
  /// The straggler option: the workers whose gradients the step went on without (the same
  /// on every worker), and whether this worker's was in.
  std::int64_t skipped = 0;
  bool contributed = true;
  /// loss_scale dynamic: the scale this step's loss was multiplied by (0 when off), and
  /// whether its averaged gradient overflowed, so that no replica took the step (the same
  /// on every worker).
  double loss_scale = 0;
  bool overflow = false;
  MSGPACK_DEFINE(step, loss, correct, predictions, samples, batch_size, data_wait_seconds, compute_seconds, allreduce_seconds,
                 bytes_sent, grad_norm, bound_wait_seconds, ahead, step_seconds, noise_scale, lr,
                 skipped, contributed, loss_scale, overflow)
};

/// Loss and accuracy over the validation split (text: per character, next-character accuracy
/// and bits per character; 0 for a classifier).
struct validation {
  double loss = 0;
  double accuracy = 0;
  std::int64_t samples = 0;
  double seconds = 0;
  double bits_per_char = 0;
  MSGPACK_DEFINE(loss, accuracy, samples, seconds, bits_per_char)
};

/// What start() found.
struct start_info {
  std::int64_t train_samples = 0;
  std::int64_t valid_samples = 0;
  std::int64_t parameters = 0;
  /// Batches per epoch of this worker's shard.
  std::int64_t batches_per_epoch = 0;
  MSGPACK_DEFINE(train_samples, valid_samples, parameters, batches_per_epoch)
};

/// The trainer-worker actor. Runs on a worker (a thread of the driver when embedded, a
/// process on a cluster); its calls run one at a time, in order. Every worker of the group
/// must receive the same calls with the same arguments (start, run_steps(k), load_state):
/// they meet in collectives.
class trainer_worker {
public:
  /// Loads the data (a stratified 80/20 split, the same on every worker), builds the model
  /// and optimiser. Throws, naming the cause, when the data is missing or the spec does
  /// not make a model.
  explicit trainer_worker(const worker_spec& spec);
  ~trainer_worker();
  trainer_worker(const trainer_worker&) = delete;
  trainer_worker& operator=(const trainer_worker&) = delete;

  /// Joins the group (every worker must call it at about the same time) and takes rank 0's
  /// initial weights by broadcast, so that every replica starts equal.
  start_info start();
  /// sharding speed: this worker's training speed in samples/s, measured on a few of its
  /// own micro-batches at batch_size (forward and backward; the gradients are dropped and
  /// the loader starts again, so the run's batches are unchanged). Call after start().
  double measure_speed();
  /// Takes every worker's micro-batch (spec.batch_split; every worker must get the same
  /// vector) and opens the loader on its weighted shard, moved to `step` (the batches of
  /// that many steps drawn and dropped). Returns this worker's batches per epoch (about the
  /// same on every worker). Fails, naming the cause, for a vector of the wrong size or a
  /// batch below 1.
  std::int64_t set_batch_split(std::vector<std::int64_t> split, std::int64_t step);
  /// Runs `steps` steps (synchronous, or through the servers after enter_async); the
  /// figures of each.
  std::vector<step_figures> run_steps(std::int64_t steps);
  /// From here on, train through `servers`: rank 0 hands them its weights and optimiser
  /// state (the replicas are equal after the synchronous steps, if any) with the current
  /// step as every worker's clock, and every worker pulls the weights back. Every worker
  /// must be called. Returns the servers' version.
  std::int64_t enter_async(parameter_server::sharded servers);
  /// The figures of the steps the last run_steps call took, also when it failed (a peer
  /// died): the driver logs a recovered run's steps from the survivors' figures. Call it
  /// when no run_steps runs (it reads what run_steps writes).
  std::vector<step_figures> last_call_figures();
  /// Asynchronous recovery and resume: goes on through `servers` (initialised already: by
  /// the driver from a checkpoint, or running while this worker replaces a dead one) as
  /// this worker from `step`, its clock there: the loader moved to that step and the
  /// weights for step + 1 pulled. Needs no group. Returns the step.
  std::int64_t join_async(parameter_server::sharded servers, std::int64_t step);
  /// Once every worker has retired from the servers: pulls their final weights, so every
  /// replica ends with them. Returns this worker's step.
  std::int64_t finish_async();
  /// The model on the validation split (any rank may; the driver asks rank 0).
  validation evaluate();
  /// A digest (FNV-1a 64) of every parameter's bytes, as 16 hex digits: equal on every
  /// worker when the replicas are equal, bit for bit.
  std::string parameters_digest();
  /// Model, optimiser and step as checkpoint entries (copies), and with loss_scale dynamic
  /// the scaler's state (`loss_scale/*`, the same on every worker).
  checkpoint::snapshot save_state();
  /// Takes a state save_state made (any rank's: the replicas are equal) and moves the data
  /// loader to that step. Returns the step.
  std::int64_t load_state(checkpoint::snapshot state);
  /// This worker's own state, which differs between replicas: the error-feedback residual
  /// (`residual/<rank>`, with compression) and LibTorch's CPU generator (`rng/torch/<rank>`,
  /// dropout's). The driver adds every worker's to rank 0's save_state; load_state takes
  /// this worker's back when the checkpoint has them.
  checkpoint::snapshot save_local_state();

  // Recovery (apps/train/README.md, "A worker that fails"): the driver learned a peer died.
  /// Makes this worker's collective in progress fail at once (collective::group::abort),
  /// so its run_steps returns instead of waiting for the timeout. Runs while run_steps
  /// does: the actor takes 2 calls at once (max_concurrency 2); every other call comes
  /// alone. True when there was a group to abort.
  bool abort_collective(std::string reason);
  /// Leaves the broken group and joins `group` (the survivors and one replacement, each
  /// with its old rank); then the member with the most steps applied (the lowest rank of
  /// them) broadcasts its weights, optimiser state and step, every member takes them and
  /// moves its loader to that step. A survivor whose step was cut short puts its
  /// error-feedback residual back as it was before that step; a replacement starts with an
  /// empty one. Returns the step the group goes on from.
  std::int64_t rejoin(std::string group);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The actor's factory.
std::unique_ptr<trainer_worker> make_trainer_worker(worker_spec spec);

} // namespace celer::train_app

