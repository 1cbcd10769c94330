// The training loop (driver.hpp, driver_run.hpp): start, the synchronous steps, recovery,
// checkpoints and the summary.
#include "driver_run.hpp"

namespace celer::train_app {

namespace fs = std::filesystem;

int driver::run() {
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
  auto metrics = metrics_files::open(dir_, /*append=*/options_.resume);
  if (!metrics) return say_failed(metrics.error().message());
  metrics_.emplace(std::move(*metrics));

  try {
    return train(began);
  } catch (const std::exception& e) {
    return say_failed(std::string("a trainer worker failed: ") + e.what());
  }
}

start_info driver::start_workers(int attempt) {
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

std::optional<std::int64_t> driver::replace_failed(int failure, const std::vector<int>& failed, const std::string& why) {
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
    const auto took = recoveries_.by_peers(failure, failed, step);
    out_ << "celer-train: the run goes on at step " << step << " with the survivors' weights and optimiser state ("
         << fixed(took.seconds, 2) << " s from the failure seen to the run going on, the failure seen "
         << fixed(took.seen_after_call_began, 2)
         << " s into its call; the failed step is run again)" << std::endl;
    return step;
  } catch (const std::exception& e) {
    out_ << "celer-train: replacing worker " << ranks << " alone did not work (" << e.what()
         << "); replacing every worker\n";
    return std::nullopt;
  }
}

worker_spec driver::make_spec(int r, const std::string& group, std::int64_t fail_at_step) const {
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

int driver::train(clock_type::time_point began) {
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

std::optional<int> driver::run_sync(progress& p) {
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
    recoveries_.call_began(call_began);
    std::vector<object_ref<std::vector<step_figures>>> calls;
    for (auto& w : workers_) calls.push_back(w.task(&trainer_worker::run_steps).remote(k));
    std::vector<std::vector<step_figures>> by_worker;
    try {
      by_worker = get_all_or_abort(calls);
    } catch (const call_failure& e) {
      // A worker failed; its peers' collectives were aborted at once. Replace the failed
      // one alone from the survivors' state; failing that (none survived, or a survivor
      // too failed to rejoin), every worker from the newest checkpoint.
      const int failure = recoveries_.count_failure();
      if (failure > cfg_.max_failures) throw;
      std::optional<std::int64_t> from;
      if (!e.failed.empty() && e.failed.size() < workers_.size()) from = replace_failed(failure, e.failed, e.what());
      if (from) {
        if (auto ok = log_survivors_steps(p, *from, e.failed); !ok) return say_failed(ok.error().message());
      } else {
        auto all = replace_workers(failure, e.what());
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
      batch_.note(t, figures, out_);
      if (cfg_.straggler_timeout_ms > 0) figures.push_back({"skipped", static_cast<double>(t.skipped)});
      loss_scale_.note(t, figures);
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

int driver::finish(progress& p, clock_type::time_point began) {
  // The point of synchronous data parallelism: every replica took the same steps (in
  // async mode, every worker pulled the servers' final weights).
  std::vector<object_ref<std::string>> digests;
  for (auto& w : workers_) digests.push_back(w.task(&trainer_worker::parameters_digest).remote());
  const auto digest = get_all(digests);
  const bool equal = std::all_of(digest.begin(), digest.end(), [&](const auto& d) { return d == digest.front(); });
  if (!p.evaluated) p.val = celer::get(workers_.front().task(&trainer_worker::evaluate).remote());
  if (servers_) servers_->stop();

  metrics_->close();
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
  recoveries_.summarise(summary);
  if (cfg_.mode != "sync") {
    summary["staleness"] = cfg_.staleness;
    summary["num_servers"] = cfg_.num_servers;
  }
  if (cfg_.data == "fortunes") summary["final_val_bits_per_char"] = p.val.bits_per_char;
  batch_.summarise(summary);
  shares_.summarise(summary);
  loss_scale_.summarise(summary);
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

expected<std::int64_t> driver::replace_workers(int failure, const std::string& why) {
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
  recoveries_.by_checkpoint(failure, step);
  out_ << "celer-train: the workers go on from " << from << " (replaced in " << fixed(seconds_since(began), 2)
       << " s; the steps after it are run and logged again)\n";
  return step;
}

expected<void> driver::save(std::int64_t step) {
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

int run_training(const train_config& cfg, const driver_options& options, std::ostream& out) {
  return driver(cfg, options, out).run();
}

} // namespace celer::train_app
