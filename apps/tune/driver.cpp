// The experiment loop (driver.hpp).
#include "driver.hpp"

#include "checkpoint_store.hpp"
#include "experiment_dir.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "trial_actor.hpp"
#include "trial_source.hpp"
#include "trial_table.hpp"

#include <celer/celer.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <ostream>

#include <unistd.h>

namespace celer::tune_app {
namespace {

using clock_type = std::chrono::steady_clock;

/// An outstanding call on a trial's actor. Calls run on the actor in the order made, and
/// the driver takes their results in that order.
struct call {
  enum class kind : unsigned char { train, save, load } what = kind::train;
  object_ref<epoch_metrics> train;
  object_ref<checkpoint::snapshot> save;
  object_ref<std::int64_t> load;
  /// save: the epoch saved.
  std::int64_t epoch = 0;

  [[nodiscard]] object_ref<void> any() const {
    switch (what) {
      case kind::train: return {train.id(), train.owner(), train.hold()};
      case kind::save: return {save.id(), save.owner(), save.hold()};
      case kind::load: return {load.id(), load.owner(), load.hold()};
    }
    return {};
  }
};

/// A trial whose actor is alive.
struct live_trial {
  trial_actor actor;
  std::deque<call> calls;
  /// The trial has ended: its actor is stopped once its last calls (a final save) are in.
  bool ending = false;
  /// The newest epoch the trial has a checkpoint of (or one on its way), -1 for none.
  std::int64_t saved_epoch = -1;
  /// The first result after a state was loaded carries where it came from.
  epoch_result note;
  /// After a restart from an older checkpoint, epochs up to this one are run again: they
  /// are recorded (in place of the first run's) but not shown to the scheduler again.
  std::int64_t rerun_until = 0;
};

class driver {
public:
  driver(experiment_config cfg, driver_options options, std::ostream& out)
    : cfg_(std::move(cfg)), options_(std::move(options)), out_(out),
      goal_{cfg_.metric, metric_mode(cfg_)}, dir_(output_dir(cfg_)),
      store_(output_dir(cfg_), checkpoints_kept(cfg_)),
      space_(make_search_space(cfg_)),
      progress_(out, options_.tty, goal_, column_names(space_), cfg_.name, planned_trials(cfg_)) {}

  int run() {
    if (auto ok = set_up(); !ok) {
      out_ << "celer-tune: " << ok.error().message() << "\n";
      return 1;
    }
    auto next_draw = clock_type::now();
    bool interrupted = false;
    for (;;) {
      if (options_.stop_requested && options_.stop_requested->load()) {
        interrupted = true;
        break;
      }
      launch();
      if (live_.empty()) break;
      if (clock_type::now() >= next_draw) {
        progress_.draw(trials_.all(), elapsed());
        next_draw = clock_type::now() + std::chrono::milliseconds(static_cast<int>(cfg_.progress_interval * 1000));
      }
      // Wait for the next result, but wake for the next drawing and to notice a stop.
      const auto until = std::min(next_draw - clock_type::now(), clock_type::duration(std::chrono::milliseconds(500)));
      take_results(std::max(until, clock_type::duration::zero()));
    }
    return finish(interrupted);
  }

private:
  /// The checkpoints each trial keeps: keep_checkpoints, and under PBT enough more that a
  /// trial's checkpoint of its last perturbation, which others may copy, stays until its next.
  static std::size_t checkpoints_kept(const experiment_config& c) {
    auto keep = static_cast<std::size_t>(c.keep_checkpoints);
    // With checkpoint_every 0 PBT's are the only ones, so the newest is the one to keep.
    if (c.scheduler.name == "pbt" && c.checkpoint_every > 0)
      keep += static_cast<std::size_t>((c.scheduler.perturbation_interval + c.checkpoint_every - 1) / c.checkpoint_every) + 1;
    return keep;
  }

  static std::vector<std::string> column_names(const tune::search_space& s) {
    std::vector<std::string> out;
    for (const auto& p : s.parameters()) out.push_back(p.name);
    return out;
  }

  [[nodiscard]] double elapsed() const {
    return std::chrono::duration<double>(clock_type::now() - start_).count();
  }

  /// The searched params, short: "{lr=0.003012, width=128}" (the files have them in full).
  std::string shown(const tune::params& p) const {
    std::string out;
    for (const auto& param : space_.parameters())
      if (const auto* v = p.find(param.name)) out += (out.empty() ? "" : ", ") + param.name + "=" + format_value(*v);
    return "{" + out + "}";
  }

  trial_summary& summary(tune::trial_id id) { return trials_.at(id); }

  void event(const std::string& what, bool with_status = false) {
    progress_.event(elapsed(), what, with_status ? &trials_.all() : nullptr);
  }

  void warn_if(const expected<void>& ok) {
    if (!ok) event("warning: " + ok.error().message());
  }

  // -- Starting -------------------------------------------------------------------------

  expected<void> set_up() {
    auto searcher = make_searcher(cfg_);
    if (!searcher) return searcher.error();
    source_.emplace(std::move(*searcher), fixed_params(cfg_));
    auto scheduler = make_scheduler(cfg_);
    if (!scheduler) return scheduler.error();
    scheduler_ = std::move(*scheduler);
    concurrency_ = cfg_.max_concurrent > 0 ? cfg_.max_concurrent : concurrency_from_resources();
    start_ = clock_type::now();
    event("celer-tune " + cfg_.name + ": " + std::to_string(planned_trials(cfg_)) + " trials (" + cfg_.searcher.name +
          ", " + cfg_.scheduler.name + "), up to " + std::to_string(cfg_.max_epochs) + " epochs each, " +
          std::to_string(concurrency_) + " at once on " + options_.where + "; results in " + dir_.root().string());
    if (!options_.resume) return dir_.create(to_json(cfg_));
    if (auto ok = dir_.create(to_json(cfg_)); !ok) return ok;  // the flags that may change on resume
    return read_back();
  }

  int concurrency_from_resources() const {
    const auto total = cluster_resources();
    const auto cpus = total.contains("CPU") ? total.at("CPU") : 1.0;
    int n = std::max(1, static_cast<int>(std::floor(cpus / cfg_.cpus_per_trial + 1e-9)));
    if (cfg_.gpus_per_trial > 0) {
      const auto gpus = total.contains("GPU") ? total.at("GPU") : 0.0;
      n = std::min(n, std::max(1, static_cast<int>(std::floor(gpus / cfg_.gpus_per_trial + 1e-9))));
    }
    return n;
  }

  /// --resume: the trials on disk. Finished ones stay finished (the searcher observes them,
  /// the scheduler sees their results); the others run again from their newest checkpoint.
  expected<void> read_back() {
    auto found = dir_.read_trials();
    if (!found) return found.error();
    const bool replay = scheduler_->name() != "pbt";  // PBT's history names checkpoints long gone
    for (auto& t : *found) {
      source_->drawn_before();
      scheduler_->on_add(t.id, t.params);
      if (!finished(t.state)) {
        source_->resume_later(t.id);
      } else {
        if (replay)
          for (const auto& r : t.results) (void)scheduler_->on_result(t.id, r.epoch, goal_.of(r));
        scheduler_->on_complete(t.id);
      }
      if (!finished(t.state)) t.state = trial_state::pending;  // until it runs again
      trials_.add(std::move(t));
    }
    std::size_t done = 0;
    for (const auto& t : trials_.all()) {
      if (!finished(t.state)) continue;
      ++done;
      const double value = t.state == trial_state::error ? std::nan("") : t.best(goal_).value_or(std::nan(""));
      warn_if(source_->observe(t.params, value));
    }
    event("resuming " + dir_.root().string() + ": " + std::to_string(done) + " trial(s) finished, " +
          std::to_string(source_->resumes_waiting()) + " to continue from their checkpoints", true);
    return {};
  }

  /// Starts trials while there is room: those a resume continues first, then new ones.
  void launch() {
    while (live_.size() < static_cast<std::size_t>(concurrency_)) {
      if (auto resumed = source_->next_resumed()) {
        continue_from_disk(*resumed);
        continue;
      }
      auto params = source_->next_new();
      if (!params) return;
      trial_summary t;
      t.id = trials_.next_id();
      t.params = std::move(*params);
      warn_if(dir_.write_params(t.id, t.params));
      warn_if(dir_.write_status(t));
      scheduler_->on_add(t.id, t.params);
      trials_.add(t);
      if (!start_actor(t.id)) continue;
      submit_train(t.id);
      event(trial_name(t.id) + " started: " + shown(t.params));
    }
  }

  /// The trial goes on from its checkpoint of `epoch` (0: the start): the results after it
  /// are run again, so their lines go, and result.jsonl keeps one line per epoch.
  void drop_results_after(trial_summary& t, std::int64_t epoch) {
    std::size_t keep = 0;
    for (std::size_t i = t.results.size(); epoch > 0 && i-- > 0;)
      if (t.results[i].epoch == epoch) {
        keep = i + 1;
        break;
      }
    if (keep < t.results.size()) {
      t.results.resize(keep);
      warn_if(dir_.truncate_results(t.id, keep));
    }
  }

  void continue_from_disk(tune::trial_id id) {
    auto& t = summary(id);
    const auto latest = store_.latest(id);
    drop_results_after(t, latest.value_or(0));
    if (scheduler_->name() != "pbt")
      for (const auto& r : t.results) (void)scheduler_->on_result(id, r.epoch, goal_.of(r));
    t.state = trial_state::pending;
    t.reason = latest ? "resumed from its checkpoint of epoch " + std::to_string(*latest) : "resumed from the start";
    warn_if(dir_.write_status(t));
    if (!start_actor(id)) return;
    auto& l = live_.at(id);
    if (latest) {
      auto back = store_.load_latest(id);
      if (back) {
        for (const auto& why : back->skipped) event("warning: " + trial_name(id) + " skipped " + why);
        if (back->epoch != *latest) drop_results_after(t, back->epoch);
        submit_load(id, std::move(back->state));
        l.saved_epoch = back->epoch;
        l.note.restored_why = "resume";
        l.note.restored_trial = id;
        l.note.restored_epoch = back->epoch;
      } else {
        event("warning: " + back.error().message() + "; " + trial_name(id) + " starts again from epoch 1");
        t.results.clear();
        warn_if(dir_.truncate_results(id, 0));
      }
    }
    submit_train(id);
    event(trial_name(id) + " " + t.reason);
  }

  /// Creates the trial's actor; false (the trial is then ERROR) when celer refuses it.
  bool start_actor(tune::trial_id id) {
    auto& t = summary(id);
    trial_spec spec;
    spec.id = id;
    spec.params = t.params;
    spec.data = cfg_.data;
    spec.limit = cfg_.limit;
    spec.threads = std::max(1, static_cast<int>(std::lround(cfg_.cpus_per_trial)));
    spec.seed = cfg_.seed;
    if (id == options_.fail_trial) {
      spec.fail_at_epoch = options_.fail_epoch;
      spec.fail_times = options_.fail_times;
      spec.fail_by_exit = options_.fail_by_exit;
      spec.driver_pid = ::getpid();
    }
    actor_options o{.num_cpus = cfg_.cpus_per_trial,
                    .num_gpus = cfg_.gpus_per_trial,
                    .max_restarts = cfg_.max_failures};
    if (cfg_.gpus_per_trial > 0) o.gpu_memory_gb = gpu_memory_for(cfg_, t.params);
    live_trial l;
    try {
      l.actor = trial_actor::create(spec, o);
    } catch (const std::exception& e) {
      t.state = trial_state::error;
      t.reason = std::string("its actor could not be created: ") + e.what();
      warn_if(dir_.write_status(t));
      scheduler_->on_complete(id);
      warn_if(source_->observe(t.params, std::nan("")));
      event(trial_name(id) + " ERROR: " + t.reason, true);
      return false;
    }
    live_[id] = std::move(l);
    return true;
  }

  // -- Calls --------------------------------------------------------------------------------

  void submit_train(tune::trial_id id) {
    auto& l = live_.at(id);
    l.calls.push_back({.what = call::kind::train, .train = l.actor.train_epoch()});
  }
  void submit_save(tune::trial_id id, std::int64_t epoch) {
    auto& l = live_.at(id);
    l.calls.push_back({.what = call::kind::save, .save = l.actor.save_state(), .epoch = epoch});
    l.saved_epoch = epoch;
  }
  void submit_load(tune::trial_id id, checkpoint::snapshot state) {
    auto& l = live_.at(id);
    l.calls.push_back({.what = call::kind::load,
                       .load = l.actor.load_state(std::move(state), summary(id).params)});
  }

  /// Waits up to `timeout` for the first call of any live trial, and takes every one ready.
  void take_results(clock_type::duration timeout) {
    std::vector<object_ref<void>> fronts;
    std::vector<tune::trial_id> owners;
    for (auto& [id, l] : live_) {
      if (l.calls.empty()) continue;
      fronts.push_back(l.calls.front().any());
      owners.push_back(id);
    }
    if (fronts.empty()) return;
    const auto ready = wait(fronts, 1, std::chrono::duration_cast<std::chrono::nanoseconds>(timeout)).ready;
    for (std::size_t i = 0; i < fronts.size(); ++i) {
      if (std::find(ready.begin(), ready.end(), fronts[i]) == ready.end()) continue;
      const auto id = owners[i];
      auto found = live_.find(id);
      // Gone meanwhile: the trial failed, or PBT took its save out of turn (checkpoint_of).
      if (found == live_.end() || found->second.calls.empty() || !(found->second.calls.front().any() == fronts[i]))
        continue;
      call c = std::move(found->second.calls.front());
      found->second.calls.pop_front();
      take(id, c);
      retire_if_done(id);
    }
  }

  void take(tune::trial_id id, const call& c) {
    switch (c.what) {
      case call::kind::train: {
        auto r = try_get(c.train);
        if (!r) return failed(id, r.error());
        return on_result(id, *r);
      }
      case call::kind::save: {
        auto r = try_get(c.save);
        if (!r) return failed(id, r.error());
        warn_if(store_.save(id, c.epoch, std::move(*r)));
        return;
      }
      case call::kind::load: {
        auto r = try_get(c.load);
        if (!r) return failed(id, r.error());
        return;
      }
    }
  }

  void retire_if_done(tune::trial_id id) {
    auto found = live_.find(id);
    if (found == live_.end() || !found->second.ending || !found->second.calls.empty()) return;
    kill(found->second.actor);
    live_.erase(found);
    warn_if(store_.release(id));
  }

  // -- Decisions ----------------------------------------------------------------------------

  void on_result(tune::trial_id id, const epoch_metrics& m) {
    auto& t = summary(id);
    auto& l = live_.at(id);
    epoch_result r = l.note;  // how the trial got here (a restore), if it was noted
    l.note = {};
    static_cast<epoch_metrics&>(r) = m;
    t.results.push_back(r);
    warn_if(dir_.append_result(id, r));
    if (t.state == trial_state::pending) {
      t.state = trial_state::running;
      t.reason.clear();
      warn_if(dir_.write_status(t));
    }
    const double value = goal_.of(r);
    char line[160];
    std::snprintf(line, sizeof line, "%s epoch %lld: %s %.4f (best %.4f)", trial_name(id).c_str(),
                  static_cast<long long>(r.epoch), goal_.metric.c_str(), value, t.best(goal_).value_or(value));
    event(line);

    if (r.epoch >= cfg_.max_epochs) return end(id, trial_state::terminated, "ran max_epochs (" + std::to_string(cfg_.max_epochs) + ")");
    if (r.epoch <= l.rerun_until) return go_on(id, r.epoch, false);
    const auto d = scheduler_->on_result(id, r.epoch, value);
    switch (d.what) {
      case tune::decision::action::stop:
        return end(id, trial_state::stopped, std::string(scheduler_->name()) + ": " + d.reason);
      case tune::decision::action::exploit: return exploit(id, d);
      case tune::decision::action::continue_: return go_on(id, r.epoch, d.save_checkpoint);
    }
  }

  /// `for_pbt`: PBT keeps this epoch's checkpoint for others to copy, whatever checkpoint_every says.
  void go_on(tune::trial_id id, std::int64_t epoch, bool for_pbt) {
    if (for_pbt || (cfg_.checkpoint_every > 0 && epoch % cfg_.checkpoint_every == 0)) submit_save(id, epoch);
    submit_train(id);
  }

  /// PBT: the trial takes `d.source`'s checkpoint of `d.source_iteration` and new params.
  void exploit(tune::trial_id id, const tune::decision& d) {
    auto state = checkpoint_of(d.source, d.source_iteration);
    if (!state) {
      event(trial_name(id) + " could not copy " + trial_name(d.source) + ": " + state.error().message() +
            "; it goes on with its own state");
      return go_on(id, summary(id).results.back().epoch, false);
    }
    // Its own line of checkpoints ends here: the copy is its newest, the one a restart takes.
    warn_if(store_.save(id, d.source_iteration, *state));
    auto& t = summary(id);
    auto& l = live_.at(id);
    t.params = d.new_params;
    t.reason = "pbt: copied " + trial_name(d.source) + " at epoch " + std::to_string(d.source_iteration);
    warn_if(dir_.write_status(t));
    submit_load(id, std::move(*state));
    l.saved_epoch = d.source_iteration;
    l.note.restored_why = "pbt";
    l.note.restored_trial = d.source;
    l.note.restored_epoch = d.source_iteration;
    l.note.params = d.new_params;
    submit_train(id);
    event(trial_name(id) + " exploits " + trial_name(d.source) + " (epoch " + std::to_string(d.source_iteration) +
          "), explores " + shown(d.new_params));
  }

  /// A trial's checkpoint: from the store, or, while its save is still on the way, taken
  /// from that call now (it runs next on the source's actor, so this wait is short).
  expected<checkpoint::snapshot> checkpoint_of(tune::trial_id source, std::int64_t epoch) {
    if (auto found = live_.find(source); found != live_.end()) {
      auto& calls = found->second.calls;
      for (auto it = calls.begin(); it != calls.end(); ++it) {
        if (it->what != call::kind::save || it->epoch != epoch) continue;
        auto r = try_get(it->save, std::chrono::seconds(120));
        if (!r) return r.error();
        if (auto ok = store_.save(source, epoch, std::move(*r)); !ok) return ok.error();
        calls.erase(it);
        break;
      }
    }
    return store_.load(source, epoch);
  }

  /// A call failed: the trial restarts from its newest checkpoint, unless it has failed more
  /// than max_failures times.
  void failed(tune::trial_id id, const error& e) {
    auto& t = summary(id);
    auto& l = live_.at(id);
    l.calls.clear();  // what was queued behind it is run and overwritten by the load below
    if (l.ending) {   // its final save: the trial's result stands without it
      event("warning: " + trial_name(id) + "'s last checkpoint was not saved: " + e.message());
      return;
    }
    ++t.failures;
    if (t.failures > cfg_.max_failures) {
      return end(id, trial_state::error,
                 "failed " + std::to_string(t.failures) + " times (max_failures " + std::to_string(cfg_.max_failures) +
                   "); last: " + e.message());
    }
    checkpoint::snapshot state;
    std::int64_t from = 0;
    if (auto back = store_.load_latest(id)) {
      for (const auto& why : back->skipped) event("warning: " + trial_name(id) + " skipped " + why);
      state = std::move(back->state);
      from = back->epoch;
    } else if (back.error().code() != error_code::not_found) {
      event("warning: " + back.error().message());
    }
    // The scheduler has seen epochs up to `reported`; run again, they are not shown twice.
    const auto reported = t.results.empty() ? std::int64_t{0} : t.results.back().epoch;
    drop_results_after(t, from);
    t.reason = "failed (" + std::to_string(t.failures) + " of max_failures " + std::to_string(cfg_.max_failures) +
               "): " + e.message();
    warn_if(dir_.write_status(t));
    l.rerun_until = std::max(l.rerun_until, reported);
    l.saved_epoch = from;
    l.note = {};
    l.note.restored_why = "restart";
    l.note.restored_trial = id;
    l.note.restored_epoch = from;
    submit_load(id, std::move(state));
    submit_train(id);
    event(trial_name(id) + " " + t.reason + "; restarting from " +
          (from > 0 ? "its checkpoint of epoch " + std::to_string(from) : std::string("the start")), true);
  }

  /// The trial is over: the scheduler and the searcher are told, its last state is saved,
  /// and its actor goes once its calls are in.
  void end(tune::trial_id id, trial_state state, const std::string& reason) {
    auto& t = summary(id);
    auto& l = live_.at(id);
    t.state = state;
    t.reason = reason;
    warn_if(dir_.write_status(t));
    scheduler_->on_complete(id);
    const double value = state == trial_state::error ? std::nan("") : t.best(goal_).value_or(std::nan(""));
    warn_if(source_->observe(t.params, value));
    l.ending = true;
    if (state != trial_state::error && cfg_.checkpoint_every > 0 && !t.results.empty() &&
        l.saved_epoch != t.results.back().epoch)
      submit_save(id, t.results.back().epoch);
    event(trial_name(id) + " " + std::string(to_string(state)) +
            (t.results.empty() ? "" : " at epoch " + std::to_string(t.results.back().epoch)) + ": " + reason,
          true);
    write_outputs();
  }

  // -- The end ------------------------------------------------------------------------------

  void write_outputs() {
    warn_if(dir_.write_results_csv(trials_.all(), goal_));
    std::string checkpoint;
    if (const auto* best = best_trial(trials_.all(), goal_)) {
      if (store_.latest(best->id)) checkpoint = store_.where(best->id).lexically_relative(dir_.root()).string();
      warn_if(dir_.write_best_config(*best, goal_, checkpoint));
    }
    report_input in{.title = cfg_.name, .summary = summary_lines(), .goal = goal_, .space = space_,
                    .trials = trials_.all(), .best_checkpoint = checkpoint};
    warn_if(write_file_atomically(dir_.root() / "report.html", render_report(in)));
  }

  std::vector<std::string> summary_lines() const {
    return run_summary(cfg_, trials_.all(), concurrency_, options_.where, elapsed());
  }

  int finish(bool interrupted) {
    // Interrupted: the trials still running stay RUNNING on disk, for --resume, which goes
    // on from their newest checkpoints: a save already next in line is worth waiting for.
    for (auto& [id, l] : live_) {
      while (!l.calls.empty() && l.calls.front().what == call::kind::save) {
        const auto c = std::move(l.calls.front());
        l.calls.pop_front();
        if (auto state = try_get(c.save, std::chrono::seconds(10))) warn_if(store_.save(id, c.epoch, std::move(*state)));
      }
      kill(l.actor);
    }
    live_.clear();
    write_outputs();
    progress_.close();
    out_ << "\n" << progress_.status_line(trials_.all(), elapsed()) << "\n" << progress_.table(trials_.all(), 0);
    std::size_t epochs = 0, errors = 0;
    for (const auto& t : trials_.all()) epochs += t.results.size(), errors += t.state == trial_state::error ? 1 : 0;
    out_ << (interrupted ? "Interrupted" : "Finished") << " after " << format_duration(elapsed()) << ": "
         << trials_.size() << " trials, " << epochs << " epochs";
    if (errors > 0) out_ << ", " << errors << " failed (see their reason in results.csv)";
    out_ << ".\n";
    if (const auto* best = best_trial(trials_.all(), goal_)) {
      const auto i = *best->best_index(goal_);
      char value[32];
      std::snprintf(value, sizeof value, "%.4f", goal_.of(best->results[i]));
      out_ << "Best trial: " << trial_name(best->id) << ", " << goal_.metric << " " << value << " at epoch "
           << best->results[i].epoch << " (" << dir_.trial_dir(best->id).string() << ")\n  " << best->params.to_json()
           << "\n";
    }
    if (cfg_.data == "synthetic") {
      // From the experiment's start to here: the last trial ended and the files written.
      out_ << "Tuning overhead (CPU-seconds beyond the trials' compute, as bench/peers/ray_tune_synthetic.py "
              "counts Ray Tune's): "
           << to_string(synthetic_overhead(trials_.all(), elapsed(), concurrency_ * cfg_.cpus_per_trial)) << "\n";
    }
    out_ << "Results in " << dir_.root().string() << "/: report.html, results.csv, best_config.json, experiment.json, trial_NNNN/\n";
    if (interrupted) {
      out_ << "Continue it with: celer-tune --resume --output " << dir_.root().string() << "\n";
      return 130;
    }
    return errors == trials_.size() && !trials_.empty() ? 1 : 0;
  }

  experiment_config cfg_;
  driver_options options_;
  std::ostream& out_;
  objective goal_;
  experiment_dir dir_;
  checkpoint_store store_;
  tune::search_space space_;
  progress progress_;
  /// Where new trials come from (the searcher) and which a resume continues; made by set_up.
  std::optional<trial_source> source_;
  std::unique_ptr<tune::scheduler> scheduler_;
  int concurrency_ = 1;
  clock_type::time_point start_;
  /// Every trial, in the order started.
  trial_table trials_;
  std::map<tune::trial_id, live_trial> live_;
};

} // namespace

int run_experiment(const experiment_config& cfg, const driver_options& options, std::ostream& out) {
  return driver(cfg, options, out).run();
}

} // namespace celer::tune_app
