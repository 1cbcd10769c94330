// The parameter-server actor (<celer/actors/parameter_server.hpp>): one shard, its optimiser
// state, the workers' clocks and the staleness bound.
#include <celer/actors/parameter_server.hpp>

#include <celer/celer.hpp>

#include "update.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <stdexcept>

namespace celer::parameter_server {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::int64_t nobody = std::numeric_limits<std::int64_t>::max();

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

reply refuse(error_code code, std::string why) {
  reply r;
  r.code = static_cast<std::uint8_t>(code);
  r.message = std::move(why);
  return r;
}

} // namespace

expected<void> validate(const optimizer_options& o) {
  auto bad = [](std::string what) { return error(error_code::invalid_argument, "optimizer " + std::move(what)); };
  if (o.name != "sgd" && o.name != "adam" && o.name != "adamw")
    return bad("name '" + o.name + "': use sgd, adam or adamw");
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return bad("lr must be above 0");
  if (!(o.momentum >= 0 && o.momentum < 1)) return bad("momentum must be in [0, 1)");
  if (o.nesterov && o.momentum == 0) return bad("nesterov needs a momentum above 0");
  if (!(o.beta1 >= 0 && o.beta1 < 1)) return bad("beta1 must be in [0, 1)");
  if (!(o.beta2 >= 0 && o.beta2 < 1)) return bad("beta2 must be in [0, 1)");
  if (!(o.eps > 0)) return bad("eps must be above 0");
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay)) return bad("weight_decay must be at least 0");
  return {};
}

struct server::impl {
  server_options o;
  /// Guards everything below; `changed` is signalled whenever a clock moves, a worker
  /// retires or init comes, which is all a waiting call waits for.
  std::mutex mutex;
  std::condition_variable changed;
  bool initialised = false;
  detail::optimizer_state state;
  std::vector<std::int64_t> clocks;
  std::vector<std::uint8_t> retired;
  std::int64_t version = 0;
  /// staleness 0: the step whose pushes are being summed, their sum and count.
  std::int64_t gathering = 0;
  std::vector<float> sum;
  std::int64_t summed = 0;
  server_stats counters;

  std::string where() const {
    return "parameter server shard " + std::to_string(o.shard) + " of " + std::to_string(o.num_shards);
  }

  /// The least clock of the workers still taking part; `nobody` when all retired.
  std::int64_t slowest() const {
    std::int64_t least = nobody;
    for (std::size_t w = 0; w < clocks.size(); ++w)
      if (retired[w] == 0) least = std::min(least, clocks[w]);
    return least;
  }

  reply ok_reply() const {
    reply r;
    r.version = version;
    const auto s = slowest();
    r.slowest_clock = s == nobody ? *std::max_element(clocks.begin(), clocks.end()) : s;
    return r;
  }

  expected<void> check_worker(int worker) const {
    if (worker < 0 || worker >= o.num_workers) {
      return error(error_code::invalid_argument, where() + ": unknown worker " + std::to_string(worker) +
                                                   " (this server has workers 0 to " +
                                                   std::to_string(o.num_workers - 1) + ")");
    }
    return {};
  }

  /// Waits (the lock held by `lock`) until init has come and every taking-part worker has
  /// pushed step `needed` (when `needed` > 0). `what` says what the caller is doing.
  expected<double> wait_for(std::unique_lock<std::mutex>& lock, std::int64_t needed, int worker,
                            const std::string& what) {
    auto ready = [&] { return initialised && (needed <= 0 || slowest() >= needed); };
    if (ready()) return 0.0;
    const auto began = clock_type::now();
    const auto deadline = began + std::chrono::milliseconds(o.timeout_ms);
    ++counters.waiting;
    ++counters.waits;
    const bool came = changed.wait_until(lock, deadline, ready);
    --counters.waiting;
    const double waited = std::chrono::duration<double>(clock_type::now() - began).count();
    counters.waited_seconds += waited;
    if (came) return waited;
    if (!initialised) {
      return error(error_code::deadline_exceeded, where() + ": worker " + std::to_string(worker) + " waited " +
                                                    seconds_text(waited) + " to " + what +
                                                    ", but the shard has no weights yet: nobody called init");
    }
    std::string slow;
    for (std::size_t w = 0; w < clocks.size(); ++w) {
      if (retired[w] != 0 || clocks[w] >= needed) continue;
      slow += (slow.empty() ? "" : ", ") + ("worker " + std::to_string(w) + " has pushed only " +
                                            std::to_string(clocks[w]) + (clocks[w] == 1 ? " step" : " steps"));
    }
    return error(error_code::deadline_exceeded,
                 where() + ": worker " + std::to_string(worker) + " waited " + seconds_text(waited) + " to " + what +
                   ": staleness " + std::to_string(o.staleness) + " needs every worker to have pushed step " +
                   std::to_string(needed) + ", and " + slow + " (slow, stuck or dead?)");
  }

  /// Applies the mean of the gathered step once every taking-part worker has pushed it.
  void maybe_apply_gathered() {
    if (summed == 0 || slowest() < gathering) return;
    detail::apply(o.optimizer, state, sum, 1.0f / static_cast<float>(summed));
    ++version;
    std::fill(sum.begin(), sum.end(), 0.0f);
    summed = 0;
  }

  /// Whether `worker` may push `step` now (the lock held): not retired, and the step is
  /// the one after its last.
  expected<void> check_order(int worker, std::int64_t step) const {
    const auto w = static_cast<std::size_t>(worker);
    if (retired[w] != 0) {
      return error(error_code::failed_precondition,
                   where() + ": worker " + std::to_string(worker) + " retired; it cannot push step " +
                     std::to_string(step));
    }
    if (step != clocks[w] + 1) {
      return error(error_code::invalid_argument,
                   where() + ": worker " + std::to_string(worker) + " pushed step " + std::to_string(step) +
                     " but its last push was step " + std::to_string(clocks[w]) +
                     ": push each step once, in order (the next is " + std::to_string(clocks[w] + 1) + ")");
    }
    return {};
  }

  /// The push itself, the lock held and the bound passed.
  expected<void> take(int worker, std::int64_t step, const celer::array<float>& gradient) {
    // Checked again: the same worker may have pushed from another thread while this waited.
    if (auto ok = check_order(worker, step); !ok) return ok;
    const auto w = static_cast<std::size_t>(worker);
    if (o.staleness == 0) {
      gathering = step;
      const float* g = gradient.data();
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += g[i];
      ++summed;
    } else {
      detail::apply(o.optimizer, state, std::span<const float>(gradient.data(), gradient.size()), 1.0f);
      ++version;
    }
    clocks[w] = step;
    ++counters.pushes;
    maybe_apply_gathered();
    changed.notify_all();
    return {};
  }

  /// Checks a gradient before the lock: its size and that it is finite.
  expected<void> check_gradient(int worker, std::int64_t step, const celer::array<float>& gradient) const {
    if (gradient.size() != o.size) {
      return error(error_code::invalid_argument,
                   where() + " holds " + std::to_string(o.size) + " floats, but worker " + std::to_string(worker) +
                     "'s gradient slice for step " + std::to_string(step) + " has " +
                     std::to_string(gradient.size()));
    }
    const float* g = gradient.data();
    for (std::size_t i = 0; i < gradient.size(); ++i) {
      if (!std::isfinite(g[i])) {
        return error(error_code::invalid_argument,
                     where() + ": worker " + std::to_string(worker) + "'s gradient for step " +
                       std::to_string(step) + " is not finite at " + std::to_string(i) +
                       " (nothing applied; skip the step, as a loss scaler does)");
      }
    }
    return {};
  }

  reply do_push(int worker, std::int64_t step, const celer::array<float>& gradient, bool then_pull) {
    if (auto ok = check_worker(worker); !ok) return refuse(ok.error().code(), ok.error().message());
    if (auto ok = check_gradient(worker, step, gradient); !ok) return refuse(ok.error().code(), ok.error().message());
    std::unique_lock lock(mutex);
    const std::string what = "push step " + std::to_string(step);
    auto waited = wait_for(lock, 0, worker, what);  // for init
    if (!waited) return refuse(waited.error().code(), waited.error().message());
    if (auto ok = check_order(worker, step); !ok) return refuse(ok.error().code(), ok.error().message());
    // Pushing step t is computing it: the same bound as pulling for it.
    auto more = wait_for(lock, step - 1 - o.staleness, worker, what);
    if (!more) return refuse(more.error().code(), more.error().message());
    if (auto ok = take(worker, step, gradient); !ok) return refuse(ok.error().code(), ok.error().message());
    if (!then_pull) {
      auto r = ok_reply();
      r.waited_seconds = *waited + *more;
      return r;
    }
    auto r = do_pull(lock, worker, step + 1);
    r.waited_seconds += *waited + *more;
    return r;
  }

  reply do_pull(std::unique_lock<std::mutex>& lock, int worker, std::int64_t step) {
    auto waited = wait_for(lock, 0, worker, "pull the weights for step " + std::to_string(step));
    if (!waited) return refuse(waited.error().code(), waited.error().message());
    const auto w = static_cast<std::size_t>(worker);
    if (step < 1 || step > clocks[w] + 1) {
      return refuse(error_code::invalid_argument,
                    where() + ": worker " + std::to_string(worker) + " asked for the weights of step " +
                      std::to_string(step) + ", but it has pushed step " + std::to_string(clocks[w]) +
                      ": pull for a step from 1 to " + std::to_string(clocks[w] + 1));
    }
    auto more = wait_for(lock, step - 1 - o.staleness, worker, "pull the weights for step " + std::to_string(step));
    if (!more) return refuse(more.error().code(), more.error().message());
    auto r = ok_reply();
    r.waited_seconds = *waited + *more;
    r.weights = celer::array<float>(state.weights.data(), state.weights.size());
    return r;
  }
};

server::server(server_options options) : impl_(std::make_unique<impl>()) {
  auto& s = *impl_;
  if (options.size == 0) throw std::invalid_argument("a parameter server shard needs a size above 0");
  if (options.num_workers < 1) throw std::invalid_argument("a parameter server needs num_workers >= 1");
  if (options.staleness < 0) throw std::invalid_argument("staleness must be at least 0");
  if (options.timeout_ms <= 0) throw std::invalid_argument("timeout_ms must be above 0");
  if (options.num_shards < 1 || options.shard < 0 || options.shard >= options.num_shards)
    throw std::invalid_argument("shard " + std::to_string(options.shard) + " is outside num_shards " +
                                std::to_string(options.num_shards));
  if (auto ok = validate(options.optimizer); !ok) throw std::invalid_argument(ok.error().message());
  s.o = std::move(options);
  s.clocks.assign(static_cast<std::size_t>(s.o.num_workers), 0);
  s.retired.assign(static_cast<std::size_t>(s.o.num_workers), 0);
  if (s.o.staleness == 0) s.sum.assign(s.o.size, 0.0f);
  s.counters.shard = s.o.shard;
}

server::~server() = default;

reply server::init(shard_state state) {
  auto& s = *impl_;
  auto sized = [&](const std::vector<float>& v, const char* what) -> expected<void> {
    if (v.empty() || v.size() == s.o.size) return {};
    return error(error_code::invalid_argument, s.where() + " holds " + std::to_string(s.o.size) + " floats; init's " +
                                                 what + " has " + std::to_string(v.size()));
  };
  if (state.weights.size() != s.o.size) {
    return refuse(error_code::invalid_argument, s.where() + " holds " + std::to_string(s.o.size) +
                                                  " floats; init's weights have " +
                                                  std::to_string(state.weights.size()));
  }
  if (auto ok = sized(state.first, "first moment"); !ok) return refuse(ok.error().code(), ok.error().message());
  if (auto ok = sized(state.second, "second moment"); !ok) return refuse(ok.error().code(), ok.error().message());
  if (state.clock < 0 || state.optimizer_steps < 0)
    return refuse(error_code::invalid_argument, s.where() + ": init's clock and optimizer_steps must be at least 0");
  std::lock_guard lock(s.mutex);
  if (s.initialised) {
    return refuse(error_code::failed_precondition,
                  s.where() + " was initialised already (version " + std::to_string(s.version) + "); init once");
  }
  s.state.weights = std::move(state.weights);
  const bool has_state = !state.first.empty();
  s.state.first = has_state ? std::move(state.first) : std::vector<float>(s.o.size, 0.0f);
  s.state.second = state.second.empty() ? std::vector<float>(s.o.size, 0.0f) : std::move(state.second);
  s.state.steps = has_state ? state.optimizer_steps : 0;
  std::fill(s.clocks.begin(), s.clocks.end(), state.clock);
  s.initialised = true;
  s.changed.notify_all();
  return s.ok_reply();
}

reply server::push(int worker, std::int64_t step, celer::array<float> gradient) {
  return impl_->do_push(worker, step, gradient, /*then_pull=*/false);
}

reply server::push_pull(int worker, std::int64_t step, celer::array<float> gradient) {
  return impl_->do_push(worker, step, gradient, /*then_pull=*/true);
}

reply server::pull(int worker, std::int64_t step) {
  auto& s = *impl_;
  if (auto ok = s.check_worker(worker); !ok) return refuse(ok.error().code(), ok.error().message());
  std::unique_lock lock(s.mutex);
  return s.do_pull(lock, worker, step);
}

reply server::retire(int worker) {
  auto& s = *impl_;
  if (auto ok = s.check_worker(worker); !ok) return refuse(ok.error().code(), ok.error().message());
  std::lock_guard lock(s.mutex);
  s.retired[static_cast<std::size_t>(worker)] = 1;
  // staleness 0: the step being gathered may now have every remaining worker's push.
  if (s.initialised) s.maybe_apply_gathered();
  s.changed.notify_all();
  return s.ok_reply();
}

state_reply server::state() {
  auto& s = *impl_;
  std::lock_guard lock(s.mutex);
  state_reply r;
  if (!s.initialised) {
    r.code = static_cast<std::uint8_t>(error_code::failed_precondition);
    r.message = s.where() + " has no weights yet: nobody called init";
    return r;
  }
  r.state.weights = s.state.weights;
  r.state.first = s.state.first;
  r.state.second = s.state.second;
  r.state.optimizer_steps = s.state.steps;
  r.state.clock = s.ok_reply().slowest_clock;
  return r;
}

server_stats server::stats() {
  auto& s = *impl_;
  std::lock_guard lock(s.mutex);
  auto out = s.counters;
  out.initialised = s.initialised;
  out.version = s.version;
  out.clocks = s.clocks;
  out.retired = s.retired;
  return out;
}

std::unique_ptr<server> make_server(server_options options) { return std::make_unique<server>(std::move(options)); }

} // namespace celer::parameter_server

CELER_REMOTE(celer::parameter_server::make_server, &celer::parameter_server::server::init, &celer::parameter_server::server::push,
             &celer::parameter_server::server::pull, &celer::parameter_server::server::push_pull,
             &celer::parameter_server::server::retire, &celer::parameter_server::server::state,
             &celer::parameter_server::server::stats);
