// The training loop's asynchronous steps (driver_run.hpp): workers stepping against the
// parameter servers within the staleness bound, one replaced at a time when it fails, and
// hybrid's switch to them.
#include "driver_run.hpp"

namespace celer::train_app {

std::optional<int> driver::run_async(progress& p, const start_info& info, std::optional<parameter_server::shard_state> from) {
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
        if (!stopping && failed.empty() && recoveries_.failures() < cfg_.max_failures) {
          const int failure = recoveries_.count_failure();
          if (auto at = replace_async(static_cast<int>(w), failure, why)) {
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

expected<void> driver::log_survivors_steps(progress& p, std::int64_t to, const std::vector<int>& failed) {
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

std::optional<std::int64_t> driver::replace_async(int rank, int failure, const std::string& why) {
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
    recoveries_.by_servers(failure, rank, step, lost);
    out_ << "celer-train: worker " << rank << " goes on at step " << step << " with the servers' weights ("
         << fixed(lost, 2) << " s; the steps it had pushed stay applied)" << std::endl;
    return step;
  } catch (const std::exception& e) {
    out_ << "celer-train: replacing worker " << rank << " did not work (" << e.what() << ")\n";
    return std::nullopt;
  }
}

} // namespace celer::train_app
