// The training loop (driver.hpp).
#include "driver.hpp"

#include "async_state.hpp"
#include "hybrid_rule.hpp"
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
namespace {

namespace fs = std::filesystem;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

class driver {
public:
  driver(train_config cfg, driver_options options, std::ostream& out)
    : cfg_(std::move(cfg)), options_(std::move(options)), out_(out), dir_(output_dir(cfg_)) {}

  int run() {
    const auto began = clock_type::now();
    // Every worker must be placed before any can step (they meet in the allreduce): say so
    // now rather than wait for a worker that can never start.
    const auto total = cluster_resources();
    const double cpus = total.contains("CPU") ? total.at("CPU") : 0.0;
    const double wanted = cfg_.cpus_per_worker * cfg_.num_workers;
    if (wanted > cpus + 1e-9) {
      out_ << "celer-train: the " << cfg_.num_workers << " workers need " << fixed(wanted, 2) << " CPUs and "
           << options_.where << " has " << fixed(cpus, 2) << ": lower num_workers or cpus_per_worker (fractions "
           << "share a CPU: --cpus-per-worker 0.5), or offer more (--num-cpus, more nodes)\n";
      return 2;
    }
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) return say_failed("cannot make the output directory " + dir_ + ": " + ec.message());
    if (!options_.resume) {
      std::ofstream(dir_ + "/run.json") << to_json(cfg_);
    }
    auto tb = trainer::event_file_writer::open({.dir = dir_ + "/tensorboard"});
    if (!tb) return say_failed(tb.error().message());
    auto jl = trainer::jsonl_writer::open({.path = dir_ + "/metrics.jsonl", .append = options_.resume});
    if (!jl) return say_failed(jl.error().message());
    tb_.emplace(std::move(*tb));
    jl_.emplace(std::move(*jl));

    try {
      return train(began);
    } catch (const std::exception& e) {
      return say_failed(std::string("a trainer worker failed: ") + e.what());
    }
  }

private:
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
            failure_seen_ = clock_type::now();
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
  start_info start_workers(int attempt) {
    // The workers: each holds cpus_per_worker CPUs and runs that many LibTorch threads.
    const std::string group = next_group();
    for (int r = 0; r < cfg_.num_workers; ++r) {
      const worker_spec spec = make_spec(r, group, attempt == 0 && r == options_.fail_rank ? options_.fail_step : 0);
      // Two calls at once: abort_collective comes while run_steps runs (recovery).
      workers_.push_back(
        actor(make_trainer_worker).options({.num_cpus = cfg_.cpus_per_worker, .max_concurrency = 2}).remote(spec));
    }
    std::vector<object_ref<start_info>> starts;
    for (auto& w : workers_) starts.push_back(w.task(&trainer_worker::start).remote());
    return get_all(starts).front();
  }

  /// A new group's name: one per set of members (a failure makes a new one).
  std::string next_group() {
    return "celer-train." + cfg_.name + "." + std::to_string(::getpid()) + "." + std::to_string(groups_++);
  }

  /// After a failure whose survivors' collectives were aborted: kills the failed workers,
  /// starts one replacement each (same rank, no injected failure), and has every worker
  /// join a new group and take the state of the survivor with the most steps applied
  /// (trainer_worker::rejoin). The step to go on from, or nothing when that did not work.
  std::optional<std::int64_t> replace_failed(int failure, const std::vector<int>& failed, const std::string& why) {
    std::string ranks;
    for (int r : failed) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    out_ << "celer-train: a worker failed (" << why << "); replacing worker " << ranks
         << " alone, from its peers' weights (failure " << failure << " of " << cfg_.max_failures << " allowed)\n";
    const std::string group = next_group();
    try {
      for (int r : failed) {
        auto& w = workers_[static_cast<std::size_t>(r)];
        try {
          celer::kill(w);
        } catch (const std::exception&) {  // gone already
        }
        w = actor(make_trainer_worker)
              .options({.num_cpus = cfg_.cpus_per_worker, .max_concurrency = 2})
              .remote(make_spec(r, group, /*fail_at_step=*/0));
      }
      std::vector<object_ref<std::int64_t>> joins;
      for (auto& w : workers_) joins.push_back(w.task(&trainer_worker::rejoin).remote(group));
      const std::int64_t step = get_all(joins).front();
      const double lost = seconds_since(failure_seen_);
      // How long the failed call had run when its failure was seen: a bound on the time
      // from the death to the driver knowing (the death came during that call).
      const double seen = std::chrono::duration<double>(failure_seen_ - call_began_).count();
      recoveries_.push_back({{"failure", failure}, {"how", "peers"}, {"replaced", failed}, {"step", step},
                             {"seconds", lost}, {"seen_after_call_began_s", seen}});
      out_ << "celer-train: the run goes on at step " << step << " with the survivors' weights and optimiser state ("
           << fixed(lost, 2) << " s from the failure seen to the run going on, the failure seen " << fixed(seen, 2)
           << " s into its call; the failed step is run again)" << std::endl;
      return step;
    } catch (const std::exception& e) {
      out_ << "celer-train: replacing worker " << ranks << " alone did not work (" << e.what()
           << "); replacing every worker\n";
      return std::nullopt;
    }
  }

  worker_spec make_spec(int r, const std::string& group, std::int64_t fail_at_step) const {
    return worker_spec{
      .rank = r,
      .world = cfg_.num_workers,
      .group = group,
      .config = cfg_,
      .local_group = cfg_.hierarchy == "by_label" ? cfg_.local_groups[static_cast<std::size_t>(r)] : std::string(),
      .batch_split = shares_.split(),
      .loader_cost_ms = r == options_.slow_rank ? options_.slow_ms : cfg_.loader_cost_ms,
      .threads = std::max(1, static_cast<int>(std::lround(cfg_.cpus_per_worker))),
      .timeout_ms = std::llround(cfg_.collective_timeout_s * 1e3),
      .overflow_at_step = r == options_.overflow_rank ? options_.overflow_step : 0,
      .speed_fraction = r == options_.speed_rank ? options_.speed_fraction : 1.0,
      .speed_from_step = options_.speed_from_step,
      .fail_at_step = fail_at_step,
      .fail_by_exit = options_.fail_by_exit,
      .driver_pid = ::getpid()};
  }

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

  int train(clock_type::time_point began) {
    const auto info = start_workers(/*attempt=*/0);
    const std::int64_t per_step = cfg_.batch_size * cfg_.accumulate_steps * cfg_.num_workers;
    progress p;
    p.steps_per_epoch = std::max<std::int64_t>(1, (info.train_samples + per_step - 1) / per_step);
    p.last = cfg_.epochs > 0 ? cfg_.epochs * p.steps_per_epoch : cfg_.max_steps;
    if (cfg_.max_steps > 0) p.last = std::min(p.last, cfg_.max_steps);
    p.eval_every = cfg_.eval_every > 0 ? cfg_.eval_every : p.steps_per_epoch;

    out_ << "celer-train: " << cfg_.name << " on " << options_.where << ": " << cfg_.num_workers << " workers x "
         << cfg_.batch_size << " samples" << (cfg_.accumulate_steps > 1 ? " x " + std::to_string(cfg_.accumulate_steps) + " micro-batches" : "")
         << " a step (" << per_step << " in all), " << info.parameters << " parameters ("
         << bytes_text(4.0 * static_cast<double>(info.parameters)) << " of gradients a step), " << info.train_samples
         << " training and " << info.valid_samples << " validation samples, " << p.steps_per_epoch << " steps an epoch, "
         << p.last << " steps; output in " << dir_ << "/\n";
    if (cfg_.mode != "sync") {
      out_ << "celer-train: " << (cfg_.mode == "async" ? "asynchronous" : "hybrid") << ": "
           << (cfg_.mode == "hybrid" ? "synchronous " + hybrid_rule(cfg_) + ", then " : std::string())
           << "each worker pushes its gradient to " << servers_text() << " and pulls fresh weights, at most "
           << cfg_.staleness << " steps ahead of the slowest" << (cfg_.staleness == 0 ? " (the servers average each step)" : "")
           << "\n";
    }

    if (cfg_.straggler_timeout_ms > 0) {
      out_ << "celer-train: stragglers: each step goes on with the gradients in hand " << cfg_.straggler_timeout_ms
           << " ms after it began; a worker's that are not in are left out of the mean and dropped (\"skipped\")\n";
    }
    if (cfg_.checkpoint_every > 0 || options_.resume) {
      auto ck = checkpoint::checkpointer::open(checkpoint_options());
      if (!ck) return say_failed("cannot open the checkpoints in " + dir_ + "/checkpoints: " + ck.error().message());
      ckpt_.emplace(std::move(*ck));
    }
    std::optional<checkpoint::restored> back;
    if (options_.resume) {
      auto got = checkpoint::restore(checkpoint_options());
      if (!got) {
        return say_failed("nothing to resume from in " + dir_ + "/checkpoints: " + got.error().message() +
                          " (a run saves checkpoints when checkpoint_every > 0)");
      }
      back.emplace(std::move(*got));
    }
    if (cfg_.sharding == "speed") {
      // A resumed run keeps the split its checkpoint was made with (its loaders' positions
      // depend on it).
      auto saved = back ? back->data.get_text("batch_split") : expected<std::string>(std::string());
      if (auto ok = shares_.choose(workers_, saved ? *saved : std::string(), out_); !ok) return say_failed(ok.error().message());
    }
    // An asynchronous checkpoint holds the servers' state, not a replica's: the servers
    // start from it and every worker joins them at its clock.
    std::optional<parameter_server::shard_state> async_from;
    if (back) {
      if (is_servers_checkpoint(back->data)) {
        auto st = servers_state(back->data);
        if (!st) return say_failed("checkpoint " + std::to_string(back->info.id) + ": " + st.error().message());
        async_from = std::move(*st);
        p.step = async_from->clock;
        if (auto at = back->data.get_int("switched_at"); at) p.switched_at = *at;
      } else {
        p.step = load_workers(*back).first;
      }
      out_ << "celer-train: resumed from checkpoint " << back->info.id << " at step " << p.step
           << (async_from ? " (asynchronous: the parameter servers' weights and optimiser state)" : "") << "\n";
    }

    p.last_line = clock_type::now();
    p.train_began = clock_type::now();
    if (cfg_.mode != "async" && !async_from)
      if (auto code = run_sync(p)) return *code;
    if (cfg_.mode != "sync" && p.step < p.last && !p.reached) {
      if (cfg_.mode == "hybrid" && p.switched_at < 0) p.switched_at = p.step;
      if (auto code = run_async(p, info, std::move(async_from))) return *code;
    }
    if (ckpt_) {
      if (auto ok = ckpt_->wait(); !ok) return say_failed("a checkpoint failed: " + ok.error().message());
    }
    return finish(p, began);
  }

  /// The synchronous steps: the whole run in mode sync, the first part of hybrid (until
  /// switch_due). An exit code to end the run with, or nothing to go on.
  std::optional<int> run_sync(progress& p) {
    const bool hybrid = cfg_.mode == "hybrid";
    while (p.step < p.last) {
      if (options_.stop_requested != nullptr && options_.stop_requested->load()) {
        if (ckpt_) {
          if (auto ok = save(p.step); !ok) out_ << "celer-train: " << ok.error().message() << "\n";
          else if (auto done = ckpt_->wait(); !done) out_ << "celer-train: " << done.error().message() << "\n";
        }
        out_ << "celer-train: stopped at step " << p.step << (ckpt_ ? "; --resume continues from here" : "") << "\n";
        return 130;
      }
      std::int64_t k = std::min(cfg_.steps_per_call, p.last - p.step);
      k = std::min(k, p.eval_every - p.step % p.eval_every);
      if (cfg_.checkpoint_every > 0) k = std::min(k, cfg_.checkpoint_every - p.step % cfg_.checkpoint_every);
      if (hybrid && p.step < cfg_.hybrid_sync_steps) k = std::min(k, cfg_.hybrid_sync_steps - p.step);
      const auto call_began = clock_type::now();
      call_began_ = call_began;
      std::vector<object_ref<std::vector<step_figures>>> calls;
      for (auto& w : workers_) calls.push_back(w.task(&trainer_worker::run_steps).remote(k));
      std::vector<std::vector<step_figures>> by_worker;
      try {
        by_worker = get_all_or_abort(calls);
      } catch (const call_failure& e) {
        // A worker failed; its peers' collectives were aborted at once. Replace the failed
        // one alone from the survivors' state; failing that (none survived, or a survivor
        // too failed to rejoin), every worker from the newest checkpoint.
        if (++failures_ > cfg_.max_failures) throw;
        std::optional<std::int64_t> from;
        if (!e.failed.empty() && e.failed.size() < workers_.size()) from = replace_failed(failures_, e.failed, e.what());
        if (from) {
          if (auto ok = log_survivors_steps(p, *from, e.failed); !ok) return say_failed(ok.error().message());
        } else {
          auto all = replace_workers(failures_, e.what());
          if (!all) return say_failed(all.error().message());
          from = *all;
        }
        p.step = *from;
        p.since_line = {};
        continue;
      }
      const double call_seconds = seconds_since(call_began);
      const double step_seconds = call_seconds / static_cast<double>(k);
      for (std::size_t i = 0; i < static_cast<std::size_t>(k); ++i) {
        const auto t = combine(by_worker, i);
        p.since_line.add(t, step_seconds);
        p.trained_samples += t.samples;
        p.seen_samples += t.samples;
        if (hybrid) p.losses.push_back(t.loss);
        auto figures = sync_figures(t, step_seconds);
        if (cfg_.batch_size_policy == "noise_scale") note_batch(t, figures);
        if (cfg_.straggler_timeout_ms > 0) figures.push_back({"skipped", static_cast<double>(t.skipped)});
        if (cfg_.loss_scale == "dynamic") {
          figures.push_back({"loss_scale", t.loss_scale});
          figures.push_back({"overflow", t.overflow ? 1.0 : 0.0});
          overflows_ += t.overflow ? 1 : 0;
          last_loss_scale_ = t.loss_scale;
        }
        if (auto ok = write(t.step, "sync", figures); !ok) return say_failed(ok.error().message());
      }
      p.trained_seconds += call_seconds;
      p.step += k;
      if (cfg_.sharding == "speed" && p.step < p.last) shares_.after_call(workers_, by_worker, k, p.step, out_);
      const bool eval_now = p.step % p.eval_every == 0 || p.step == p.last;
      if (eval_now) {
        p.val = celer::get(workers_.front().task(&trainer_worker::evaluate).remote());
        p.evaluated = true;
        if (auto ok = write_validation(p, "sync"); !ok) return say_failed(ok.error().message());
      }
      if (cfg_.checkpoint_every > 0 && (p.step % cfg_.checkpoint_every == 0 || p.step == p.last || p.reached)) {
        if (auto ok = save(p.step); !ok) return say_failed(ok.error().message());
      }
      if (eval_now || seconds_since(p.last_line) >= cfg_.progress_interval || p.step == p.last) {
        print_line(p.step, p.last, p.steps_per_epoch, p.since_line, eval_now ? &p.val : nullptr, /*async=*/false);
        p.since_line = {};
        p.last_line = clock_type::now();
      }
      if (p.reached) break;
      if (hybrid && switch_due(p)) break;
    }
    return std::nullopt;
  }

  /// The asynchronous steps: each worker runs its calls as fast as the staleness bound lets
  /// it (a call to a worker goes out as soon as its last one returns), rank 0 evaluates
  /// between its calls, and a step's line is written once every worker has reported it. An
  /// exit code to end the run with, or nothing to go on.
  std::optional<int> run_async(progress& p, const start_info& info, std::optional<parameter_server::shard_state> from) {
    auto began = clock_type::now();
    const bool sgd = cfg_.optimizer == "sgd";
    auto made = parameter_server::sharded::create(
      {.size = static_cast<std::uint64_t>(info.parameters), .num_shards = cfg_.num_servers,
       .num_workers = cfg_.num_workers, .staleness = cfg_.staleness,
       // The rule LibTorch's optimiser of that name applies on the replicas
       // (<celer/actors/torch/model.hpp>'s make_optimizer): Nesterov when sgd has momentum.
       .optimizer = {.name = cfg_.optimizer, .lr = cfg_.lr, .momentum = sgd ? cfg_.momentum : 0.0,
                     .nesterov = sgd && cfg_.momentum > 0, .weight_decay = cfg_.weight_decay},
       .timeout = std::chrono::milliseconds(std::llround(cfg_.collective_timeout_s * 1e3))});
    if (!made) return say_failed("cannot make the parameter servers: " + made.error().message());
    servers_.emplace(std::move(*made));
    if (from) {
      // Resumed: the servers from the checkpoint, every worker at its clock.
      if (auto ok = servers_->init(*from); !ok) return say_failed("cannot give the parameter servers the checkpoint: " + ok.error().message());
      std::vector<object_ref<std::int64_t>> joins;
      for (auto& w : workers_) joins.push_back(w.task(&trainer_worker::join_async).remote(*servers_, from->clock));
      (void)get_all(joins);
    } else {
      std::vector<object_ref<std::int64_t>> enters;
      for (auto& w : workers_) enters.push_back(w.task(&trainer_worker::enter_async).remote(*servers_));
      (void)get_all(enters);  // throws, naming the worker: run() reports it
    }
    if (cfg_.mode == "hybrid" && !from) {
      // The switch is part of the training time (and of the next progress line's).
      out_ << "celer-train: hybrid: switched to asynchronous training at step " << p.step << " (" << switch_reason_
           << ") in " << fixed(seconds_since(began), 2) << " s: staleness " << cfg_.staleness << ", " << servers_text()
           << std::endl;
    } else {
      // Making the servers is set-up, as starting the workers is: the training clock starts now.
      p.train_began = p.last_line = began = clock_type::now();
    }
    const std::size_t n = workers_.size();
    std::vector<std::int64_t> done(n, p.step);
    std::vector<std::optional<object_ref<std::vector<step_figures>>>> busy(n);
    std::vector<bool> retired(n, false);
    // Steps some worker has reported and others not yet; rank 0's validations by step.
    std::map<std::int64_t, std::vector<step_figures>> pending;
    std::map<std::int64_t, validation> validations;
    std::string failed;
    bool stopping = false, interrupted = false;

    auto complete = [&](std::int64_t step) {
      for (std::size_t w = 0; w < n; ++w)
        if (done[w] < step && !retired[w]) return false;
      return true;
    };
    // Writes every step all workers have reported (or never will), in order.
    auto flush = [&]() -> expected<void> {
      while (!pending.empty() && complete(pending.begin()->first)) {
        const auto t = combine_async(pending.begin()->second);
        pending.erase(pending.begin());
        p.since_line.add(t, 0);
        p.trained_samples += t.samples;
        p.step = t.step;
        if (auto ok = write(t.step, "async", async_figures(t)); !ok) return ok;
        const auto v = validations.find(t.step);
        const bool validated = v != validations.end();
        if (validated) {
          p.val = v->second;
          validations.erase(v);
          if (auto ok = write_validation(p, "async"); !ok) return ok;
        }
        if (validated || seconds_since(p.last_line) >= cfg_.progress_interval) print_async_line(p, validated);
        if (ckpt_ && cfg_.checkpoint_every > 0 && t.step % cfg_.checkpoint_every == 0)
          if (auto ok = save_async(p); !ok) return ok;
      }
      return {};
    };

    for (;;) {
      if (!stopping && options_.stop_requested != nullptr && options_.stop_requested->load()) stopping = interrupted = true;
      // Idle workers get their next call, or, with nothing left to do, retire: the bound
      // stops waiting for them.
      for (std::size_t w = 0; w < n; ++w) {
        if (busy[w] || retired[w]) continue;
        if (!stopping && done[w] < p.last) {
          std::int64_t k = std::min(cfg_.steps_per_call, p.last - done[w]);
          if (w == 0) k = std::min(k, p.eval_every - done[w] % p.eval_every);
          busy[w] = workers_[w].task(&trainer_worker::run_steps).remote(k);
          continue;
        }
        if (auto ok = servers_->retire(static_cast<int>(w)); !ok && failed.empty())
          failed = "retiring worker " + std::to_string(w) + ": " + ok.error().message();
        retired[w] = true;
      }
      std::vector<object_ref<std::vector<step_figures>>> calls;
      for (const auto& b : busy)
        if (b) calls.push_back(*b);
      if (calls.empty()) break;
      // A call ends with its steps or fails (a dead worker's at once; one held at the
      // bound past collective_timeout_s): no timeout needed here.
      const auto ready = celer::wait(calls, 1);
      for (const auto& r : ready.ready) {
        const auto w = static_cast<std::size_t>(
          std::find_if(busy.begin(), busy.end(), [&](const auto& b) { return b && *b == r; }) - busy.begin());
        busy[w].reset();
        std::vector<step_figures> figures;
        try {
          figures = celer::get(r);
        } catch (const std::exception& e) {
          const std::string why = "worker " + std::to_string(w) + ": " + e.what();
          if (!stopping && failed.empty() && failures_ < cfg_.max_failures) {
            ++failures_;
            if (auto at = replace_async(static_cast<int>(w), failures_, why)) {
              done[w] = std::max(done[w], *at);  // steps it pushed but never reported count as done
              continue;
            }
          }
          failed += (failed.empty() ? "" : "; ") + why;
          stopping = true;
          continue;
        }
        for (const auto& f : figures) {
          pending[f.step].push_back(f);
          done[w] = f.step;
          p.seen_samples += f.samples;
        }
        // Rank 0 evaluates the weights it has just pulled, between its calls; the others
        // go on meanwhile. The last step's validation comes after every worker's end.
        if (w == 0 && !stopping && done[0] < p.last && done[0] % p.eval_every == 0) {
          const auto v = celer::get(workers_[0].task(&trainer_worker::evaluate).remote());
          validations[done[0]] = v;
          reached_target(p, v, done[0]);
          if (p.reached) stopping = true;
        }
      }
      if (auto ok = flush(); !ok) {
        failed += (failed.empty() ? "" : "; ") + ok.error().message();
        stopping = true;
      }
    }
    // Every worker has retired now: what is left is complete.
    if (auto ok = flush(); !ok && failed.empty()) failed = ok.error().message();
    p.trained_seconds += seconds_since(began);
    if (!failed.empty()) return say_failed("a trainer worker failed: " + failed);
    if (interrupted) {
      if (ckpt_) {
        if (auto ok = save_async(p); !ok) out_ << "celer-train: " << ok.error().message() << "\n";
        else if (auto done_saving = ckpt_->wait(); !done_saving) out_ << "celer-train: " << done_saving.error().message() << "\n";
      }
      out_ << "celer-train: stopped at step " << p.step << (ckpt_ ? "; --resume continues from here" : " (no checkpoints: checkpoint_every is 0)") << "\n";
      return 130;
    }
    if (ckpt_ && cfg_.checkpoint_every > 0 && p.step % cfg_.checkpoint_every != 0)
      if (auto ok = save_async(p); !ok) return say_failed(ok.error().message());  // the last step's
    // Every worker has retired: each takes the servers' final weights, and rank 0 evaluates them.
    std::vector<object_ref<std::int64_t>> finals;
    for (auto& w : workers_) finals.push_back(w.task(&trainer_worker::finish_async).remote());
    const auto steps = get_all(finals);
    p.step = *std::max_element(steps.begin(), steps.end());
    p.val = celer::get(workers_.front().task(&trainer_worker::evaluate).remote());
    p.evaluated = true;
    if (auto ok = write_validation(p, "async"); !ok) return say_failed(ok.error().message());
    print_async_line(p, /*with_validation=*/true);
    return std::nullopt;
  }

  /// After the last step: every replica's digest, the summary, the last lines.
  int finish(progress& p, clock_type::time_point began) {
    // The point of synchronous data parallelism: every replica took the same steps (in
    // async mode, every worker pulled the servers' final weights).
    std::vector<object_ref<std::string>> digests;
    for (auto& w : workers_) digests.push_back(w.task(&trainer_worker::parameters_digest).remote());
    const auto digest = get_all(digests);
    const bool equal = std::all_of(digest.begin(), digest.end(), [&](const auto& d) { return d == digest.front(); });
    if (!p.evaluated) p.val = celer::get(workers_.front().task(&trainer_worker::evaluate).remote());
    if (servers_) servers_->stop();

    (void)tb_->close();
    (void)jl_->close();
    const double rate = p.trained_seconds > 0 ? static_cast<double>(p.trained_samples) / p.trained_seconds : 0;
    nlohmann::ordered_json summary{{"name", cfg_.name},
                                   {"mode", cfg_.mode},
                                   {"steps", p.step},
                                   {"epochs", static_cast<double>(p.step) / static_cast<double>(p.steps_per_epoch)},
                                   {"num_workers", cfg_.num_workers},
                                   {"final_val_accuracy", p.val.accuracy},
                                   {"final_val_loss", p.val.loss},
                                   {"samples_per_s", rate},
                                   {"train_seconds", seconds_since(p.train_began)},
                                   {"seconds", seconds_since(began)},
                                   {"parameters_digests", digest},
                                   {"replicas_equal", equal}};
    if (!recoveries_.empty()) summary["recoveries"] = recoveries_;
    if (cfg_.mode != "sync") {
      summary["staleness"] = cfg_.staleness;
      summary["num_servers"] = cfg_.num_servers;
    }
    if (cfg_.data == "fortunes") summary["final_val_bits_per_char"] = p.val.bits_per_char;
    if (cfg_.batch_size_policy == "noise_scale") {
      summary["final_batch_size"] = last_batch_;
      summary["final_noise_scale"] = last_noise_scale_ >= 0 ? nlohmann::json(last_noise_scale_) : nullptr;
    }
    shares_.summarise(summary);
    if (cfg_.loss_scale == "dynamic") {
      summary["loss_scale_overflows"] = overflows_;
      summary["final_loss_scale"] = last_loss_scale_;
    }
    if (cfg_.mode == "hybrid") summary["switched_at_step"] = p.switched_at >= 0 ? nlohmann::json(p.switched_at) : nullptr;
    if (cfg_.target_accuracy > 0) {
      summary["target_accuracy"] = cfg_.target_accuracy;
      summary["reached_target"] = p.reached;
      summary["steps_to_target"] = p.reached ? nlohmann::json(p.reached_step) : nullptr;
      summary["seconds_to_target"] = p.reached ? nlohmann::json(p.reached_seconds) : nullptr;
      summary["samples_to_target"] = p.reached ? nlohmann::json(p.reached_samples) : nullptr;
    }
    std::ofstream(dir_ + "/summary.json") << summary.dump(2) << "\n";
    if (cfg_.target_accuracy > 0) {
      if (p.reached) {
        out_ << "celer-train: reached the target accuracy " << fixed(cfg_.target_accuracy, 4) << " at step "
             << p.reached_step << ", " << fixed(p.reached_seconds, 2) << " s into training, after " << p.reached_samples
             << " training samples\n";
      } else {
        out_ << "celer-train: the target accuracy " << fixed(cfg_.target_accuracy, 4) << " was not reached in "
             << p.step << " steps\n";
      }
    }
    out_ << "celer-train: final validation " << (cfg_.data == "fortunes" ? "next-character " : "") << "accuracy "
         << fixed(p.val.accuracy, 4) << " (loss " << fixed(p.val.loss, 4)
         << (cfg_.data == "fortunes" ? ", " + fixed(p.val.bits_per_char, 3) + " bits per character" : std::string())
         << ") after " << p.step << " steps, " << fixed(rate, 0) << " samples/s, " << fixed(seconds_since(began), 1)
         << " s in all\n";
    if (!equal) {
      out_ << "celer-train: the replicas differ at the end (parameter digests";
      for (const auto& d : digest) out_ << " " << d;
      out_ << "): " << (cfg_.mode == "sync" ? "synchronous data parallelism" : "pulling the servers' final weights")
           << " broke; this is a bug\n";
      return 1;
    }
    out_ << "celer-train: the " << digest.size() << " replicas are equal (parameter digest " << digest.front()
         << "); metrics in " << dir_ << "/metrics.jsonl and " << dir_ << "/tensorboard/\n";
    return 0;
  }

  /// hybrid: whether the synchronous part is over, by hybrid_sync_steps or by the loss
  /// plateau rule; sets switch_reason_.
  /// hybrid: whether to switch now (and why, for the console line).
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

  /// batch_size_policy noise_scale: the step's global batch and noise scale into its
  /// metrics, and a console line when the batch has grown (at the same step on every
  /// worker: the figures the workers grow by are allreduced).
  void note_batch(const step_total& t, std::vector<trainer::scalar>& figures) {
    figures.push_back({"batch_size", static_cast<double>(t.batch_size)});
    if (t.noise_scale >= 0) figures.push_back({"noise_scale", t.noise_scale});
    figures.push_back({"lr", t.lr});
    if (last_batch_ > 0 && t.batch_size != last_batch_) {
      out_ << "celer-train: step " << t.step << ": the batch grows from " << last_batch_ << " to " << t.batch_size
           << " samples a step (noise scale " << fixed(last_noise_scale_, 0) << " > " << last_batch_ << ")"
           << (cfg_.batch_size_lr_scaling != "none" ? ", lr " + fixed(t.lr, 5) : std::string()) << "\n";
    }
    last_batch_ = t.batch_size;
    last_noise_scale_ = t.noise_scale;
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
  expected<std::int64_t> replace_workers(int failure, const std::string& why) {
    out_ << "celer-train: a worker failed (" << why << "); replacing the workers (failure " << failure << " of "
         << cfg_.max_failures << " allowed)\n";
    const auto began = clock_type::now();
    for (auto& w : workers_) celer::kill(w);
    workers_.clear();
    try {
      (void)start_workers(failure);
    } catch (const std::exception& e) {
      return error(error_code::unavailable, std::string("cannot start the replacement workers: ") + e.what());
    }
    std::int64_t step = 0;
    std::string from = "the initial weights (no checkpoint yet)";
    if (ckpt_) {
      if (auto done = ckpt_->wait(); !done) return error(done.error().code(), "a checkpoint failed: " + done.error().message());
      auto back = restore_workers();
      if (back) {
        step = back->first;
        from = "checkpoint " + std::to_string(back->second) + " at step " + std::to_string(step);
      } else if (back.error().code() != error_code::not_found) {
        return error(back.error().code(), "cannot restore the replacement workers: " + back.error().message());
      }
    }
    recoveries_.push_back({{"failure", failure}, {"how", "checkpoint"}, {"step", step},
                           {"seconds", seconds_since(failure_seen_)}});
    out_ << "celer-train: the workers go on from " << from << " (replaced in " << fixed(seconds_since(began), 2)
         << " s; the steps after it are run and logged again)\n";
    return step;
  }

  /// After a worker was replaced from its peers at step `to`: the steps after `p.step` up to
  /// `to` were taken by the survivors in the failed call, whose result was lost. They are
  /// logged from the survivors' figures (trainer_worker::last_call_figures), marked
  /// `survivors_only`: the failed worker's share of them is gone with it.
  expected<void> log_survivors_steps(progress& p, std::int64_t to, const std::vector<int>& failed) {
    std::map<std::int64_t, std::vector<step_figures>> by_step;
    for (std::size_t r = 0; r < workers_.size(); ++r) {
      if (std::find(failed.begin(), failed.end(), static_cast<int>(r)) != failed.end()) continue;
      for (const auto& f : celer::get(workers_[r].task(&trainer_worker::last_call_figures).remote()))
        if (f.step > p.step && f.step <= to) by_step[f.step].push_back(f);
    }
    for (const auto& [step, figures] : by_step) {
      const auto t = combine_async(figures);
      double seconds = 0;
      for (const auto& f : figures) seconds = std::max(seconds, f.step_seconds);
      p.trained_samples += t.samples;
      p.seen_samples += t.samples;
      auto line = sync_figures(t, seconds > 0 ? seconds : 1.0);
      line.push_back({"survivors_only", 1.0});
      if (auto ok = write(step, "sync", line); !ok) return ok;
    }
    return {};
  }

  /// Asynchronous: replaces worker `rank`, whose call failed, by a new actor that joins
  /// the running servers at the clock they hold for it (the others go on meanwhile, held
  /// at the staleness bound at most collective_timeout_s). That step, or nothing when the
  /// replacement failed too.
  std::optional<std::int64_t> replace_async(int rank, int failure, const std::string& why) {
    out_ << "celer-train: a worker failed (" << why << "); replacing worker " << rank
         << " alone, from the parameter servers (failure " << failure << " of " << cfg_.max_failures << " allowed)\n";
    const auto began = clock_type::now();
    try {
      auto& w = workers_[static_cast<std::size_t>(rank)];
      try {
        celer::kill(w);
      } catch (const std::exception&) {  // gone already
      }
      // Its clock: the last step it pushed (the least over the shards).
      auto stats = servers_->stats();
      if (!stats) throw std::runtime_error("the servers' clocks: " + stats.error().message());
      std::int64_t clock = std::numeric_limits<std::int64_t>::max();
      for (const auto& st : *stats) clock = std::min(clock, st.clocks.at(static_cast<std::size_t>(rank)));
      w = actor(make_trainer_worker)
            .options({.num_cpus = cfg_.cpus_per_worker, .max_concurrency = 2})
            .remote(make_spec(rank, next_group(), /*fail_at_step=*/0));
      const auto step = celer::get(w.task(&trainer_worker::join_async).remote(*servers_, clock));
      const double lost = seconds_since(began);
      recoveries_.push_back({{"failure", failure}, {"how", "servers"}, {"replaced", {rank}}, {"step", step}, {"seconds", lost}});
      out_ << "celer-train: worker " << rank << " goes on at step " << step << " with the servers' weights ("
           << fixed(lost, 2) << " s; the steps it had pushed stay applied)" << std::endl;
      return step;
    } catch (const std::exception& e) {
      out_ << "celer-train: replacing worker " << rank << " did not work (" << e.what() << ")\n";
      return std::nullopt;
    }
  }

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

  expected<void> save(std::int64_t step) {
    auto state = celer::get(workers_.front().task(&trainer_worker::save_state).remote());
    // And what differs between the replicas: each one's residual and generator.
    std::vector<object_ref<checkpoint::snapshot>> locals;
    for (auto& w : workers_) locals.push_back(w.task(&trainer_worker::save_local_state).remote());
    for (const auto& local : get_all(locals))
      for (const auto& e : local.entries()) state.add(e);
    state.set_metadata("run", cfg_.name);
    if (auto id = ckpt_->save(state); !id) return error(id.error().code(), "checkpoint at step " + std::to_string(step) + ": " + id.error().message());
    return {};
  }

  expected<void> write(std::int64_t step, const char* mode, std::span<const trainer::scalar> figures) {
    if (auto ok = tb_->add_scalars(step, figures); !ok) return ok;
    const trainer::text_field texts[] = {{"mode", mode}};
    return jl_->write(step, texts, figures);
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
  std::optional<trainer::event_file_writer> tb_;
  std::optional<trainer::jsonl_writer> jl_;
  std::optional<checkpoint::checkpointer> ckpt_;
  /// async and hybrid: the parameter servers, once made.
  std::optional<parameter_server::sharded> servers_;
  /// hybrid: why the switch came (for its console line).
  std::string switch_reason_;
  /// Groups made so far (each set of members joins a new one), when the last failure was
  /// seen, and each recovery (summary.json's `recoveries`).
  int groups_ = 0;
  /// Worker failures survived so far, synchronous and asynchronous steps together.
  int failures_ = 0;
  clock_type::time_point failure_seen_ = clock_type::now();
  clock_type::time_point call_began_ = clock_type::now();
  nlohmann::json recoveries_ = nlohmann::json::array();
  /// noise_scale: the last step's global batch and noise scale (note_batch).
  std::int64_t last_batch_ = 0;
  double last_noise_scale_ = -1;
  /// loss_scale dynamic: steps skipped for overflow so far (this call of the program), and
  /// the last step's scale.
  std::int64_t overflows_ = 0;
  double last_loss_scale_ = 0;
  /// sharding speed: the batch split and its changes (empty split: equal shards).
  speed_shares shares_{cfg_};
};

} // namespace

int run_training(const train_config& cfg, const driver_options& options, std::ostream& out) {
  return driver(cfg, options, out).run();
}

} // namespace celer::train_app
