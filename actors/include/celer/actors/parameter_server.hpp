#pragma once
/// Parameter servers with bounded staleness: each server actor holds one shard of a flat
/// float32 parameter vector and the optimiser state for it, and applies the updates itself.
/// Workers push gradients and pull weights; none may run more than `staleness` steps ahead
/// of the slowest (stale-synchronous parallel, Ho et al. 2013), and a call that would go
/// past the bound waits inside the server until the slow worker catches up.
///
///   namespace ps = celer::parameter_server;
///   // The driver: 2 shards of a 26,122-float model, 4 workers at most 2 steps apart.
///   auto servers = ps::sharded::create({.size = 26122, .num_shards = 2, .num_workers = 4,
///                                       .staleness = 2, .optimizer = {.name = "adam", .lr = 1e-3}});
///   if (!servers) return servers.error();
///   (void)servers->init({.weights = initial});          // once: the starting weights
///   // Worker r (an actor; a `sharded` travels as an argument), each step t = 1, 2, ...:
///   auto got = servers->push_pull(r, t, grads, weights); // pushes step t, pulls for t + 1
///   if (!got) ...                                        // e.g. deadline_exceeded naming the slow worker
///   // At the end: nobody waits for a worker that pushes no more.
///   (void)servers->retire(r);
///
/// Steps and clocks. A worker's clock is the last step it pushed (0 at the start, or the
/// `clock` given to init). It pushes step clock + 1, once, in order. Pulling the weights for
/// step t, or pushing step t, waits until every worker still taking part has pushed step
/// t - 1 - staleness (so at most `staleness` of the slowest worker's updates are missing from
/// what it reads). A call that waits longer than `timeout_ms` fails with deadline_exceeded,
/// naming the workers it waited for.
///
/// Updates. With staleness > 0 every push is applied at once, as one optimiser step on that
/// worker's gradient (asynchronous SGD, as Downpour): n workers make n updates a step.
/// With staleness 0 the servers are synchronous: the pushes of step t are summed, and when
/// the last worker's arrives their mean is applied as one optimiser step, the update of
/// synchronous data parallelism (an allreduce of the mean, then a step); pulls for step
/// t + 1 get the weights after it.
///
/// Errors come back as values (`celer::expected` from the client, a code and a message in
/// the server's replies): invalid_argument for a worker outside [0, num_workers), a slice
/// of the wrong size, a step out of order, a NaN or infinite gradient (refused, nothing
/// applied); failed_precondition for a push from a retired worker or a second init;
/// deadline_exceeded at the bound; unavailable when a server actor is gone.

#include <celer/codec.hpp>
#include <celer/error.hpp>
#include <celer/handles.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace celer::parameter_server {

/// The update rule a server applies to its shard: the formulas of LibTorch's (and PyTorch's)
/// optimisers of the same name, element by element, in float32.
struct optimizer_options {
  /// "sgd", "adam" or "adamw".
  std::string name = "sgd";
  double lr = 0.01;
  /// sgd: momentum (0: none), without dampening; Nesterov's form when `nesterov`.
  double momentum = 0;
  bool nesterov = false;
  /// adam, adamw.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  /// sgd, adam: an L2 term added to the gradient; adamw: decoupled decay of the weights.
  double weight_decay = 0;
  MSGPACK_DEFINE(name, lr, momentum, nesterov, beta1, beta2, eps, weight_decay)
};

/// Checks the options: invalid_argument naming the field.
[[nodiscard]] expected<void> validate(const optimizer_options& o);

/// What a server is made from (the actor factory's argument).
struct server_options {
  /// Which shard this is, of how many (for messages).
  int shard = 0;
  int num_shards = 1;
  /// Floats this shard holds.
  std::uint64_t size = 0;
  /// Workers pushing to it, 0 .. num_workers-1.
  int num_workers = 1;
  /// Steps a worker may run ahead of the slowest (0: synchronous).
  int staleness = 0;
  optimizer_options optimizer;
  /// How long a call waits at the bound (or for init) before deadline_exceeded.
  std::int64_t timeout_ms = 120'000;
  MSGPACK_DEFINE(shard, num_shards, size, num_workers, staleness, optimizer, timeout_ms)
};

/// Weights and optimiser state: a shard's, or (through `sharded`) the whole vector's.
struct shard_state {
  std::vector<float> weights;
  /// sgd: the momentum buffer; adam/adamw: the first moment (exp_avg). Empty: no state yet.
  std::vector<float> first;
  /// adam/adamw: the second moment (exp_avg_sq). Empty: zeros.
  std::vector<float> second;
  /// Optimiser steps taken (adam's bias correction; for sgd, > 0 once the momentum buffer
  /// holds something). Taken as 0 when `first` is empty.
  std::int64_t optimizer_steps = 0;
  /// Every worker's clock: the steps already taken (a switch from synchronous training at
  /// step 40 passes 40, and each worker then pushes step 41 first).
  std::int64_t clock = 0;
  MSGPACK_DEFINE(weights, first, second, optimizer_steps, clock)
};

/// A server's answer to a call. `code` is an error_code (0: ok) and `message` says why.
struct reply {
  std::uint8_t code = 0;
  std::string message;
  /// Updates applied to the shard so far.
  std::int64_t version = 0;
  /// The slowest taking-part worker's clock after the call.
  std::int64_t slowest_clock = 0;
  /// How long the call waited at the bound (or for init).
  double waited_seconds = 0;
  /// pull and push_pull: the shard's weights.
  celer::array<float> weights;
  MSGPACK_DEFINE(code, message, version, slowest_clock, waited_seconds, weights)
};

/// A server's counters.
struct server_stats {
  int shard = 0;
  bool initialised = false;
  std::int64_t version = 0;
  /// Each worker's clock, and whether it retired.
  std::vector<std::int64_t> clocks;
  std::vector<std::uint8_t> retired;
  std::int64_t pushes = 0;
  /// Calls waiting at the bound now, calls that waited at all, and their seconds in all.
  std::int64_t waiting = 0;
  std::int64_t waits = 0;
  double waited_seconds = 0;
  MSGPACK_DEFINE(shard, initialised, version, clocks, retired, pushes, waiting, waits, waited_seconds)
};

/// A state reply: code 0 and the shard's state, or why not.
struct state_reply {
  std::uint8_t code = 0;
  std::string message;
  shard_state state;
  MSGPACK_DEFINE(code, message, state)
};

/// The parameter-server actor: one shard. Create it with `make_server` (or through
/// `sharded::create`) and max_concurrency above the number of workers: calls that wait at
/// the bound hold one of the actor's threads each, and the pushes that release them need
/// others. Every method may run at once with the others; one mutex guards the shard.
class server {
public:
  /// Throws std::invalid_argument for bad options (the actor then fails to start).
  explicit server(server_options options);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Sets the weights, the optimiser state and every worker's clock. Once; calls that came
  /// earlier wait for it.
  reply init(shard_state state);
  /// Worker `worker`'s gradient for `step` (its clock + 1).
  reply push(int worker, std::int64_t step, celer::array<float> gradient);
  /// The weights to compute `step` with (at most the worker's clock + 1).
  reply pull(int worker, std::int64_t step);
  /// push(step), then pull(step + 1): one round trip a step.
  reply push_pull(int worker, std::int64_t step, celer::array<float> gradient);
  /// The worker pushes no more: the bound stops waiting for it (its pulls still work).
  reply retire(int worker);
  /// Weights and optimiser state (a copy), with the slowest taking-part worker's clock.
  state_reply state();
  server_stats stats();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The actor factory (registered with CELER_REMOTE).
std::unique_ptr<server> make_server(server_options options);

/// [begin, end) of shard `shard` when `size` floats are split over `num_shards`: contiguous,
/// as even as can be (the first size % num_shards shards hold one more).
[[nodiscard]] std::pair<std::size_t, std::size_t> shard_range(std::size_t size, int num_shards, int shard);
/// `whole` cut into its shards' slices, in shard order.
[[nodiscard]] std::vector<std::vector<float>> split(std::span<const float> whole, int num_shards);
/// Slices back into one vector.
[[nodiscard]] std::vector<float> concat(const std::vector<std::vector<float>>& slices);

/// How `sharded::create` makes its servers.
struct sharded_options {
  /// Floats in the whole parameter vector.
  std::uint64_t size = 0;
  /// Server actors, each holding one contiguous shard.
  int num_shards = 1;
  int num_workers = 1;
  int staleness = 0;
  optimizer_options optimizer;
  std::chrono::milliseconds timeout{120'000};
  /// CPUs each server actor holds (0: none reserved, like any actor by default).
  double cpus_per_server = 0;
};

/// What a sharded call saw over all its shards.
struct exchange_info {
  /// The fewest updates any shard has applied.
  std::int64_t version = 0;
  /// The slowest worker's clock (the least over the shards).
  std::int64_t slowest_clock = 0;
  /// The longest wait at the bound among the shards.
  double waited_seconds = 0;
};

/// The client: a flat vector split over k server actors, each call sent to every shard at
/// once and then awaited. A value (copy it, or pass it to another actor as an argument:
/// it travels as its servers' handles). Blocks the calling thread; use one per worker.
class sharded {
public:
  sharded() = default;
  /// Creates the servers. invalid_argument for a size of 0, fewer floats than shards,
  /// num_shards or num_workers below 1, a negative staleness, bad optimiser options.
  [[nodiscard]] static expected<sharded> create(const sharded_options& options);

  /// Sets the whole vector's weights (and optimiser state, clocks): each shard its slice.
  [[nodiscard]] expected<void> init(const shard_state& whole);
  [[nodiscard]] expected<exchange_info> push(int worker, std::int64_t step, std::span<const float> gradient);
  /// Fills `weights` (size() floats) with the weights for `step`.
  [[nodiscard]] expected<exchange_info> pull(int worker, std::int64_t step, std::span<float> weights);
  /// Pushes step `step` and fills `weights` with the weights for step + 1. `gradient` and
  /// `weights` may be the same buffer.
  [[nodiscard]] expected<exchange_info> push_pull(int worker, std::int64_t step, std::span<const float> gradient,
                                                  std::span<float> weights);
  [[nodiscard]] expected<void> retire(int worker);
  /// The whole vector's weights and optimiser state; `clock` is the slowest worker's.
  [[nodiscard]] expected<shard_state> state();
  [[nodiscard]] expected<std::vector<server_stats>> stats();
  /// Stops the server actors (their state is gone).
  void stop();

  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] int num_shards() const noexcept { return static_cast<int>(servers_.size()); }
  [[nodiscard]] const std::vector<actor_handle<server>>& servers() const noexcept { return servers_; }

  MSGPACK_DEFINE(servers_, size_)

private:
  std::vector<actor_handle<server>> servers_;
  std::uint64_t size_ = 0;
};

} // namespace celer::parameter_server
