#pragma once
// celer-train's driver (driver.hpp's run_training): the run from start to summary, the workers
// it makes, replaces and checkpoints. Its methods are in driver.cpp (start, the synchronous
// steps, recovery, the summary) and driver_async.cpp (the asynchronous steps against the
// parameter servers). Internal to apps/train; no LibTorch.
//
// What it keeps beside the workers is in classes of its own: metrics_files (metrics.jsonl and
// the event file), recovery_log (the failures survived and how), batch_growth and
// loss_scale_record (what noise_scale and dynamic loss scaling add to each step and to the
// summary), speed_shares (sharding speed's split).
#include "driver.hpp"

#include "async_state.hpp"
#include "batch_growth.hpp"
#include "hybrid_rule.hpp"
#include "loss_scale_record.hpp"
#include "metrics_files.hpp"
#include "recovery_log.hpp"
#include "speed_shares.hpp"
#include "step_totals.hpp"
#include "worker.hpp"

#include <celer/actors/checkpoint.hpp>
#include <celer/actors/parameter_server.hpp>
#include <celer/actors/trainer/metrics_log.hpp>
#include <celer/celer.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <stdexcept>

#include <unistd.h>

namespace celer::train_app {

class driver {
public:
  driver(train_config cfg, driver_options options, std::ostream& out)
    : cfg_(std::move(cfg)), options_(std::move(options)), out_(out), dir_(output_dir(cfg_)) {}

  int run();

private:
  static double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
  }
  int say_failed(const std::string& why) {
    out_ << "celer-train: " << why << "\n";
    return 1;
  }

  /// Every worker's result of one call each, in rank order. When calls fail, throws once
  /// every call has ended (so the workers are idle when the caller replaces them), naming
  /// each failed worker and why: the one that failed first and the peers that then timed
  /// out waiting for it.
  template <class R>
  std::vector<R> get_all(std::vector<object_ref<R>>& refs) {
    std::vector<R> out;
    out.reserve(refs.size());
    std::string failed;
    for (std::size_t r = 0; r < refs.size(); ++r) {
      try {
        out.push_back(celer::get(refs[r]));
      } catch (const std::exception& e) {
        failed += (failed.empty() ? "" : "; ") + ("worker " + std::to_string(r) + ": ") + e.what();
      }
    }
    if (!failed.empty()) throw std::runtime_error(failed);
    return out;
  }

  /// A call of every worker that failed: who failed for a reason of its own (died, threw:
  /// to replace) and who only because its collective broke (the survivors).
  struct call_failure : std::runtime_error {
    call_failure(const std::string& why, std::vector<int> failed_ranks)
      : std::runtime_error(why), failed(std::move(failed_ranks)) {}
    std::vector<int> failed;
  };

  /// Every worker's result of one call each, in rank order, as get_all; but the first
  /// failure (a dead worker's call fails at once) makes the driver abort the others'
  /// collectives (trainer_worker::abort_collective), so they end now rather than at
  /// collective_timeout_s. Throws a call_failure once every call has ended.
  template <class R>
  std::vector<R> get_all_or_abort(std::vector<object_ref<R>>& refs) {
    std::vector<std::optional<R>> got(refs.size());
    std::vector<bool> ended(refs.size(), false);
    std::vector<int> failed;
    std::string why;
    bool aborted = false;
    std::vector<object_ref<bool>> aborts;
    for (std::size_t left = refs.size(); left > 0;) {
      std::vector<object_ref<R>> waiting;
      for (std::size_t r = 0; r < refs.size(); ++r)
        if (!ended[r]) waiting.push_back(refs[r]);
      const auto ready = celer::wait(waiting, 1);
      for (const auto& ref : ready.ready) {
        const auto r = static_cast<std::size_t>(std::find(refs.begin(), refs.end(), ref) - refs.begin());
        ended[r] = true;
        --left;
        try {
          got[r] = celer::get(refs[r]);
        } catch (const std::exception& e) {
          const std::string what = e.what();
          why += (why.empty() ? "" : "; ") + ("worker " + std::to_string(r) + ": ") + what;
          // A call that failed in its collective (broken by a peer, or aborted here) is a
          // survivor's; any other failure (its process died, it threw) is its own.
          const bool collective_only = what.find("collective group") != std::string::npos &&
                                       dynamic_cast<const actor_died_error*>(&e) == nullptr;
          if (!collective_only) failed.push_back(static_cast<int>(r));
          if (!aborted) {
            aborted = true;
            recoveries_.failure_seen();
            const std::string reason = "worker " + std::to_string(r) + " failed";
            for (std::size_t o = 0; o < refs.size(); ++o)
              if (!ended[o]) aborts.push_back(workers_[o].task(&trainer_worker::abort_collective).remote(reason));
          }
        }
      }
    }
    // Every abort has run before the caller goes on (a late one must not meet the next group).
    for (auto& a : aborts) {
      try {
        (void)celer::get(a);
      } catch (const std::exception&) {  // that worker is dead: nothing to abort
      }
    }
    if (!why.empty()) throw call_failure(why, failed);
    std::vector<R> out;
    out.reserve(got.size());
    for (auto& g : got) out.push_back(std::move(*g));
    return out;
  }

  /// Creates the workers (set `attempt`, 0 first) and has them join their group and take
  /// rank 0's weights.
  start_info start_workers(int attempt);

  /// A new group's name: one per set of members (a failure makes a new one).
  std::string next_group() {
    return "celer-train." + cfg_.name + "." + std::to_string(::getpid()) + "." + std::to_string(groups_++);
  }

  /// After a failure whose survivors' collectives were aborted: kills the failed workers,
  /// starts one replacement each (same rank, no injected failure), and has every worker
  /// join a new group and take the state of the survivor with the most steps applied
  /// (trainer_worker::rejoin). The step to go on from, or nothing when that did not work.
  std::optional<std::int64_t> replace_failed(int failure, const std::vector<int>& failed, const std::string& why);

  worker_spec make_spec(int r, const std::string& group, std::int64_t fail_at_step) const;

  /// Loads `back` (a restored checkpoint) into every worker; its step, and its id.
  std::pair<std::int64_t, std::uint64_t> load_workers(const checkpoint::restored& back) {
    std::vector<object_ref<std::int64_t>> loads;
    for (auto& w : workers_) loads.push_back(w.task(&trainer_worker::load_state).remote(back.data));
    return std::pair{get_all(loads).front(), back.info.id};
  }

  /// Loads the newest checkpoint into every worker; its step, and its id (0 for none).
  expected<std::pair<std::int64_t, std::uint64_t>> restore_workers() {
    auto back = checkpoint::restore(checkpoint_options());
    if (!back) return back.error();
    return load_workers(*back);
  }

  int train(clock_type::time_point began);

  /// The synchronous steps: the whole run in mode sync, the first part of hybrid (until
  /// switch_due). An exit code to end the run with, or nothing to go on.
  std::optional<int> run_sync(progress& p);

  /// The asynchronous steps: each worker runs its calls as fast as the staleness bound lets
  /// it (a call to a worker goes out as soon as its last one returns), rank 0 evaluates
  /// between its calls, and a step's line is written once every worker has reported it. An
  /// exit code to end the run with, or nothing to go on.
  std::optional<int> run_async(progress& p, const start_info& info, std::optional<parameter_server::shard_state> from);

  /// After the last step: every replica's digest, the summary, the last lines.
  int finish(progress& p, clock_type::time_point began);

  /// hybrid: whether the synchronous part is over, by hybrid_sync_steps or by the loss
  /// plateau rule; sets switch_reason_ (for the console line).
  bool switch_due(const progress& p) {
    auto why = hybrid_switch_reason(cfg_, p.step, p.losses);
    if (why) switch_reason_ = std::move(*why);
    return why.has_value();
  }

  std::string servers_text() const {
    return std::to_string(cfg_.num_servers) + (cfg_.num_servers == 1 ? " parameter server" : " parameter servers");
  }

  /// Records the first validation that reached target_accuracy.
  void reached_target(progress& p, const validation& v, std::int64_t step) {
    if (cfg_.target_accuracy <= 0 || p.reached || v.accuracy < cfg_.target_accuracy) return;
    p.reached = true;
    p.reached_step = step;
    p.reached_seconds = seconds_since(p.train_began);
    p.reached_samples = p.seen_samples;
  }

  expected<void> write_validation(progress& p, const char* mode) {
    reached_target(p, p.val, p.step);  // async: recorded when rank 0 evaluated already
    std::vector<trainer::scalar> figures = {{"val_loss", p.val.loss}, {"val_accuracy", p.val.accuracy}};
    if (cfg_.data == "fortunes") figures.push_back({"val_bits_per_char", p.val.bits_per_char});
    return write(p.step, mode, figures);
  }

  void print_async_line(progress& p, bool with_validation) {
    // Samples/s over the wall time since the last line: the workers run at once.
    p.since_line.seconds = seconds_since(p.last_line);
    print_line(p.step, p.last, p.steps_per_epoch, p.since_line, with_validation ? &p.val : nullptr, /*async=*/true);
    p.since_line = {};
    p.last_line = clock_type::now();
  }

  /// After a failure: stops every worker, starts a new set in a new group and loads the
  /// newest checkpoint into it (or starts from step 0 without one). The step to go on from.
  expected<std::int64_t> replace_workers(int failure, const std::string& why);

  /// After a worker was replaced from its peers at step `to`: the steps after `p.step` up to
  /// `to` were taken by the survivors in the failed call, whose result was lost. They are
  /// logged from the survivors' figures (trainer_worker::last_call_figures), marked
  /// `survivors_only`: the failed worker's share of them is gone with it.
  expected<void> log_survivors_steps(progress& p, std::int64_t to, const std::vector<int>& failed);

  /// Asynchronous: replaces worker `rank`, whose call failed, by a new actor that joins
  /// the running servers at the clock they hold for it (the others go on meanwhile, held
  /// at the staleness bound at most collective_timeout_s). That step, or nothing when the
  /// replacement failed too.
  std::optional<std::int64_t> replace_async(int rank, int failure, const std::string& why);

  /// Asynchronous checkpoint: the servers' weights and optimiser state, at the slowest
  /// worker's clock (the step a resumed run starts every worker from).
  expected<void> save_async(const progress& p) {
    auto st = servers_->state();
    if (!st) return error(st.error().code(), "checkpoint: the servers' state: " + st.error().message());
    auto s = servers_checkpoint(*st, p.switched_at);  // views of *st, copied by save
    s.set_metadata("run", cfg_.name);
    if (auto id = ckpt_->save(s); !id)
      return error(id.error().code(), "checkpoint at step " + std::to_string(st->clock) + ": " + id.error().message());
    return {};
  }

  checkpoint::options checkpoint_options() const {
    return {.archive_dir = dir_ + "/checkpoints", .archive_keep_last = 3};
  }

  expected<void> save(std::int64_t step);

  expected<void> write(std::int64_t step, const char* mode, std::span<const trainer::scalar> figures) {
    return metrics_->write(step, mode, figures);
  }

  void print_line(std::int64_t step, std::int64_t last, std::int64_t steps_per_epoch, const window& w,
                  const validation* val, bool async) {
    if (w.steps > 0) out_ << progress_line(cfg_, step, last, steps_per_epoch, w, val, async) << std::endl;
  }

  train_config cfg_;
  driver_options options_;
  std::ostream& out_;
  std::string dir_;
  std::vector<actor_handle<trainer_worker>> workers_;
  /// metrics.jsonl and the event file, once open (run).
  std::optional<metrics_files> metrics_;
  std::optional<checkpoint::checkpointer> ckpt_;
  /// async and hybrid: the parameter servers, once made.
  std::optional<parameter_server::sharded> servers_;
  /// hybrid: why the switch came (for its console line).
  std::string switch_reason_;
  /// Groups made so far (each set of members joins a new one).
  int groups_ = 0;
  /// Worker failures survived so far, and each recovery (summary.json's `recoveries`).
  recovery_log recoveries_;
  /// noise_scale: each step's batch and noise scale.
  batch_growth batch_{cfg_};
  /// loss_scale dynamic: each step's scale and overflows.
  loss_scale_record loss_scale_{cfg_};
  /// sharding speed: the batch split and its changes (empty split: equal shards).
  speed_shares shares_{cfg_};
};

} // namespace celer::train_app
