// The training loop (driver.hpp).
#include "driver.hpp"

#include "worker.hpp"

#include <celer/actors/checkpoint.hpp>
#include <celer/actors/trainer/metrics_log.hpp>
#include <celer/celer.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <stdexcept>

#include <unistd.h>

namespace celer::train_app {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string bytes_text(double b) {
  if (b >= 1e6) return fixed(b / 1e6, 2) + " MB";
  if (b >= 1e3) return fixed(b / 1e3, 1) + " KB";
  return fixed(b, 0) + " B";
}

/// One step's figures over all workers.
struct step_total {
  std::int64_t step = 0;
  double loss = 0;  // over all samples of the step
  double accuracy = 0;
  std::int64_t samples = 0;
  /// Per worker, averaged over the workers.
  double bytes_sent = 0;
  double data_wait = 0;
  double compute = 0;
  double allreduce = 0;
  double grad_norm = 0;
};

step_total combine(const std::vector<std::vector<step_figures>>& by_worker, std::size_t i) {
  step_total t;
  double loss_sum = 0;
  std::int64_t correct = 0;
  const auto n = static_cast<double>(by_worker.size());
  for (const auto& w : by_worker) {
    const auto& f = w[i];
    t.step = f.step;
    loss_sum += f.loss * static_cast<double>(f.samples);
    correct += f.correct;
    t.samples += f.samples;
    t.bytes_sent += static_cast<double>(f.bytes_sent) / n;
    t.data_wait += f.data_wait_seconds / n;
    t.compute += f.compute_seconds / n;
    t.allreduce += f.allreduce_seconds / n;
    t.grad_norm = f.grad_norm;  // the averaged gradient: the same on every worker
  }
  if (t.samples > 0) {
    t.loss = loss_sum / static_cast<double>(t.samples);
    t.accuracy = static_cast<double>(correct) / static_cast<double>(t.samples);
  }
  return t;
}

/// What the progress line averages, since the last line.
struct window {
  std::int64_t steps = 0;
  std::int64_t samples = 0;
  double seconds = 0;
  double loss = 0;
  double bytes = 0;
  double data_wait = 0;
  double compute = 0;
  double allreduce = 0;
  double grad_norm = 0;
  void add(const step_total& t, double step_seconds) {
    ++steps;
    samples += t.samples;
    seconds += step_seconds;
    loss += t.loss;
    bytes += t.bytes_sent;
    data_wait += t.data_wait;
    compute += t.compute;
    allreduce += t.allreduce;
    grad_norm += t.grad_norm;
  }
};

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

  /// Creates the workers (set `attempt`, 0 first) and has them join their group and take
  /// rank 0's weights.
  start_info start_workers(int attempt) {
    // The workers: each holds cpus_per_worker CPUs and runs that many LibTorch threads.
    const std::string group =
      "celer-train." + cfg_.name + "." + std::to_string(::getpid()) + "." + std::to_string(attempt);
    for (int r = 0; r < cfg_.num_workers; ++r) {
      worker_spec spec{.rank = r, .world = cfg_.num_workers, .group = group, .data = cfg_.data,
                       .limit = cfg_.limit, .model = cfg_.model, .width = cfg_.width, .depth = cfg_.depth,
                       .dropout = cfg_.dropout, .optimizer = cfg_.optimizer, .lr = cfg_.lr,
                       .weight_decay = cfg_.weight_decay, .momentum = cfg_.momentum,
                       .batch_size = cfg_.batch_size, .accumulate_steps = cfg_.accumulate_steps,
                       .compression = cfg_.compression, .topk_fraction = cfg_.topk_fraction,
                       .clip_grad_norm = cfg_.clip_grad_norm,
                       .loader_threads = cfg_.loader_threads, .prefetch = cfg_.prefetch,
                       .loader_cost_ms = cfg_.loader_cost_ms,
                       .threads = std::max(1, static_cast<int>(std::lround(cfg_.cpus_per_worker))),
                       .seed = cfg_.seed,
                       .timeout_ms = std::llround(cfg_.collective_timeout_s * 1e3),
                       .fail_at_step = attempt == 0 && r == options_.fail_rank ? options_.fail_step : 0,
                       .fail_by_exit = options_.fail_by_exit,
                       .driver_pid = ::getpid()};
      workers_.push_back(actor(make_trainer_worker).options({.num_cpus = cfg_.cpus_per_worker}).remote(spec));
    }
    std::vector<object_ref<start_info>> starts;
    for (auto& w : workers_) starts.push_back(w.task(&trainer_worker::start).remote());
    return get_all(starts).front();
  }

  /// Loads the newest checkpoint into every worker; its step, and its id (0 for none).
  expected<std::pair<std::int64_t, std::uint64_t>> restore_workers() {
    auto back = checkpoint::restore(checkpoint_options());
    if (!back) return back.error();
    std::vector<object_ref<std::int64_t>> loads;
    for (auto& w : workers_) loads.push_back(w.task(&trainer_worker::load_state).remote(back->data));
    return std::pair{get_all(loads).front(), back->info.id};
  }

  int train(clock_type::time_point began) {
    const auto info = start_workers(/*attempt=*/0);
    const std::int64_t per_step = cfg_.batch_size * cfg_.accumulate_steps * cfg_.num_workers;
    const std::int64_t steps_per_epoch = std::max<std::int64_t>(1, (info.train_samples + per_step - 1) / per_step);
    std::int64_t last = cfg_.epochs > 0 ? cfg_.epochs * steps_per_epoch : cfg_.max_steps;
    if (cfg_.max_steps > 0) last = std::min(last, cfg_.max_steps);
    const std::int64_t eval_every = cfg_.eval_every > 0 ? cfg_.eval_every : steps_per_epoch;

    out_ << "celer-train: " << cfg_.name << " on " << options_.where << ": " << cfg_.num_workers << " workers x "
         << cfg_.batch_size << " samples" << (cfg_.accumulate_steps > 1 ? " x " + std::to_string(cfg_.accumulate_steps) + " micro-batches" : "")
         << " a step (" << per_step << " in all), " << info.parameters << " parameters ("
         << bytes_text(4.0 * static_cast<double>(info.parameters)) << " of gradients a step), " << info.train_samples
         << " training and " << info.valid_samples << " validation samples, " << steps_per_epoch << " steps an epoch, "
         << last << " steps; output in " << dir_ << "/\n";

    std::int64_t step = 0;
    if (cfg_.checkpoint_every > 0 || options_.resume) {
      auto ck = checkpoint::checkpointer::open(checkpoint_options());
      if (!ck) return say_failed("cannot open the checkpoints in " + dir_ + "/checkpoints: " + ck.error().message());
      ckpt_.emplace(std::move(*ck));
    }
    if (options_.resume) {
      auto back = restore_workers();
      if (!back) {
        return say_failed("nothing to resume from in " + dir_ + "/checkpoints: " + back.error().message() +
                          " (a run saves checkpoints when checkpoint_every > 0)");
      }
      step = back->first;
      out_ << "celer-train: resumed from checkpoint " << back->second << " at step " << step << "\n";
    }
    int failures = 0;

    window since_line;
    auto last_line = clock_type::now();
    const auto train_began = clock_type::now();
    std::int64_t trained_samples = 0;
    double trained_seconds = 0;
    validation val;
    bool evaluated = false;
    while (step < last) {
      if (options_.stop_requested != nullptr && options_.stop_requested->load()) {
        if (ckpt_) {
          if (auto ok = save(step); !ok) out_ << "celer-train: " << ok.error().message() << "\n";
          else if (auto done = ckpt_->wait(); !done) out_ << "celer-train: " << done.error().message() << "\n";
        }
        out_ << "celer-train: stopped at step " << step << (ckpt_ ? "; --resume continues from here" : "") << "\n";
        return 130;
      }
      std::int64_t k = std::min(cfg_.steps_per_call, last - step);
      k = std::min(k, eval_every - step % eval_every);
      if (cfg_.checkpoint_every > 0) k = std::min(k, cfg_.checkpoint_every - step % cfg_.checkpoint_every);
      const auto call_began = clock_type::now();
      std::vector<object_ref<std::vector<step_figures>>> calls;
      for (auto& w : workers_) calls.push_back(w.task(&trainer_worker::run_steps).remote(k));
      std::vector<std::vector<step_figures>> by_worker;
      try {
        by_worker = get_all(calls);
      } catch (const std::exception& e) {
        // A worker failed (and its peers, waiting for it in the allreduce, after the
        // collective's timeout). Replace them all and go on from the newest checkpoint.
        if (++failures > cfg_.max_failures) throw;
        auto from = replace_workers(failures, e.what());
        if (!from) return say_failed(from.error().message());
        step = *from;
        since_line = {};
        continue;
      }
      const double call_seconds = seconds_since(call_began);
      const double step_seconds = call_seconds / static_cast<double>(k);
      for (std::size_t i = 0; i < static_cast<std::size_t>(k); ++i) {
        const auto t = combine(by_worker, i);
        since_line.add(t, step_seconds);
        trained_samples += t.samples;
        const trainer::scalar figures[] = {
          {"loss", t.loss},
          {"accuracy", t.accuracy},
          {"samples_per_s", static_cast<double>(t.samples) / step_seconds},
          {"bytes_sent", t.bytes_sent},
          {"data_wait_s", t.data_wait},
          {"compute_s", t.compute},
          {"allreduce_s", t.allreduce},
          {"grad_norm", t.grad_norm},
        };
        if (auto ok = write(t.step, figures); !ok) return say_failed(ok.error().message());
      }
      trained_seconds += call_seconds;
      step += k;
      const bool eval_now = step % eval_every == 0 || step == last;
      if (eval_now) {
        val = celer::get(workers_.front().task(&trainer_worker::evaluate).remote());
        evaluated = true;
        const trainer::scalar figures[] = {{"val_loss", val.loss}, {"val_accuracy", val.accuracy}};
        if (auto ok = write(step, figures); !ok) return say_failed(ok.error().message());
      }
      if (cfg_.checkpoint_every > 0 && (step % cfg_.checkpoint_every == 0 || step == last)) {
        if (auto ok = save(step); !ok) return say_failed(ok.error().message());
      }
      if (eval_now || seconds_since(last_line) >= cfg_.progress_interval || step == last) {
        print_line(step, last, steps_per_epoch, since_line, eval_now ? &val : nullptr);
        since_line = {};
        last_line = clock_type::now();
      }
    }
    if (ckpt_) {
      if (auto ok = ckpt_->wait(); !ok) return say_failed("a checkpoint failed: " + ok.error().message());
    }

    // The point of synchronous data parallelism: every replica took the same steps.
    std::vector<object_ref<std::string>> digests;
    for (auto& w : workers_) digests.push_back(w.task(&trainer_worker::parameters_digest).remote());
    const auto digest = get_all(digests);
    const bool equal = std::all_of(digest.begin(), digest.end(), [&](const auto& d) { return d == digest.front(); });
    if (!evaluated) val = celer::get(workers_.front().task(&trainer_worker::evaluate).remote());

    (void)tb_->close();
    (void)jl_->close();
    const double rate = trained_seconds > 0 ? static_cast<double>(trained_samples) / trained_seconds : 0;
    nlohmann::ordered_json summary{{"name", cfg_.name},
                                   {"steps", step},
                                   {"epochs", static_cast<double>(step) / static_cast<double>(steps_per_epoch)},
                                   {"num_workers", cfg_.num_workers},
                                   {"final_val_accuracy", val.accuracy},
                                   {"final_val_loss", val.loss},
                                   {"samples_per_s", rate},
                                   {"train_seconds", seconds_since(train_began)},
                                   {"seconds", seconds_since(began)},
                                   {"parameters_digests", digest},
                                   {"replicas_equal", equal}};
    std::ofstream(dir_ + "/summary.json") << summary.dump(2) << "\n";
    out_ << "celer-train: final validation accuracy " << fixed(val.accuracy, 4) << " (loss " << fixed(val.loss, 4)
         << ") after " << step << " steps, " << fixed(rate, 0) << " samples/s, " << fixed(seconds_since(began), 1)
         << " s in all\n";
    if (!equal) {
      out_ << "celer-train: the replicas differ at the end (parameter digests";
      for (const auto& d : digest) out_ << " " << d;
      out_ << "): synchronous data parallelism broke; this is a bug\n";
      return 1;
    }
    out_ << "celer-train: the " << digest.size() << " replicas are equal (parameter digest " << digest.front()
         << "); metrics in " << dir_ << "/metrics.jsonl and " << dir_ << "/tensorboard/\n";
    return 0;
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
    out_ << "celer-train: the workers go on from " << from << " (replaced in " << fixed(seconds_since(began), 2)
         << " s; the steps after it are run and logged again)\n";
    return step;
  }

  checkpoint::options checkpoint_options() const {
    return {.archive_dir = dir_ + "/checkpoints", .archive_keep_last = 3};
  }

  expected<void> save(std::int64_t step) {
    auto state = celer::get(workers_.front().task(&trainer_worker::save_state).remote());
    state.set_metadata("run", cfg_.name);
    if (auto id = ckpt_->save(state); !id) return error(id.error().code(), "checkpoint at step " + std::to_string(step) + ": " + id.error().message());
    return {};
  }

  expected<void> write(std::int64_t step, std::span<const trainer::scalar> figures) {
    if (auto ok = tb_->add_scalars(step, figures); !ok) return ok;
    return jl_->write(step, figures);
  }

  void print_line(std::int64_t step, std::int64_t last, std::int64_t steps_per_epoch, const window& w,
                  const validation* val) {
    if (w.steps == 0) return;
    const double n = static_cast<double>(w.steps);
    const auto ms = [&](double s) { return fixed(1e3 * s / n, 2) + " ms"; };
    out_ << "step " << step << "/" << last << "  epoch " << fixed(static_cast<double>(step) / static_cast<double>(steps_per_epoch), 1)
         << "  loss " << fixed(w.loss / n, 4) << "  " << fixed(static_cast<double>(w.samples) / w.seconds, 0)
         << " samples/s  sent " << bytes_text(w.bytes / n) << "/step  data-wait " << ms(w.data_wait) << "  compute "
         << ms(w.compute) << "  allreduce " << ms(w.allreduce) << "  |g| " << fixed(w.grad_norm / n, 3);
    if (val != nullptr) out_ << "  val_acc " << fixed(val->accuracy, 4) << "  val_loss " << fixed(val->loss, 4);
    out_ << std::endl;
  }

  train_config cfg_;
  driver_options options_;
  std::ostream& out_;
  std::string dir_;
  std::vector<actor_handle<trainer_worker>> workers_;
  std::optional<trainer::event_file_writer> tb_;
  std::optional<trainer::jsonl_writer> jl_;
  std::optional<checkpoint::checkpointer> ckpt_;
};

} // namespace

int run_training(const train_config& cfg, const driver_options& options, std::ostream& out) {
  return driver(cfg, options, out).run();
}

} // namespace celer::train_app
