// Reading, checking and writing a run's configuration (config.hpp).
#include "config.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace celer::train_app {
namespace {

error invalid(std::string message) { return error(error_code::invalid_argument, std::move(message)); }

} // namespace

const apps::config_schema<train_config>& config_keys() {
  using c = train_config;
  using apps::field;
  using apps::list_field;
  static const apps::config_schema<train_config> all{{
    field("name", &c::name, "the run's name: the output directory is ./celer_results/<name>"),
    field("output", &c::output, "the output directory (default ./celer_results/<name>)"),
    field("data", &c::data, "digits | fashion-mnist | fortunes (text, with model transformer) | records:<dir> (celer-preprocess's output)"),
    field("limit", &c::limit, "use only the first N samples (0: all)"),
    field("num_workers", &c::num_workers, "trainer-worker actors, one model replica each"),
    field("cpus_per_worker", &c::cpus_per_worker, "CPUs each worker holds (its LibTorch threads)"),
    field("model", &c::model, "mlp | cnn (digits, fashion-mnist) | transformer (fortunes)").one_of({"mlp", "cnn", "transformer"}),
    field("width", &c::width, "hidden units (mlp), channels (cnn) or embedding width (transformer)"),
    field("depth", &c::depth, "hidden layers (mlp), conv blocks (cnn) or decoder blocks (transformer)"),
    field("context", &c::context, "transformer: characters a window (a sample) holds"),
    field("heads", &c::heads, "transformer: attention heads (they divide width)"),
    field("dropout", &c::dropout, "dropout probability in [0, 1)"),
    field("optimizer", &c::optimizer, "adam | adamw | sgd").one_of({"adam", "adamw", "sgd"}),
    field("lr", &c::lr, "learning rate"),
    field("weight_decay", &c::weight_decay, "L2 penalty (decoupled for adamw)"),
    field("momentum", &c::momentum, "sgd's momentum (Nesterov when > 0)"),
    field("batch_size", &c::batch_size, "samples per micro-batch on each worker"),
    field("accumulate_steps", &c::accumulate_steps, "micro-batches summed before each allreduce and step"),
    field("compression", &c::compression, "none | sign (1-bit, error feedback) | topk (error feedback)").one_of({"none", "sign", "topk"}),
    field("topk_fraction", &c::topk_fraction, "topk: the fraction of the gradient's entries sent a step"),
    field("precision", &c::precision, "fp32 | bf16 (forward pass under CPU autocast; fp32 weights, gradients, allreduce)").one_of({"fp32", "bf16"}, "fp16 is for GPUs; this build trains on CPUs"),
    field("batch_size_policy", &c::batch_size_policy, "fixed | noise_scale (the batch doubles while the gradient noise scale exceeds it)").one_of({"fixed", "noise_scale"}),
    field("max_batch_size", &c::max_batch_size, "noise_scale: the largest batch, samples a step over all workers"),
    field("batch_size_cooldown", &c::batch_size_cooldown, "noise_scale: steps between two growths of the batch"),
    field("batch_size_lr_scaling", &c::batch_size_lr_scaling, "noise_scale: none | sqrt | linear (the lr follows batch / starting batch)").one_of({"none", "sqrt", "linear"}),
    field("loss_scale", &c::loss_scale, "none | dynamic (loss x scale; a step whose gradient overflows is skipped and the scale halves)").one_of({"none", "dynamic"}),
    field("loss_scale_init", &c::loss_scale_init, "dynamic: the first scale (65536)"),
    field("loss_scale_growth_interval", &c::loss_scale_growth_interval, "dynamic: clean steps in a row before the scale doubles"),
    field("clip_grad_norm", &c::clip_grad_norm, "clip the averaged gradient to this L2 norm (0: off)"),
    field("epochs", &c::epochs, "passes over the training split, all workers together"),
    field("max_steps", &c::max_steps, "stop after this many steps (0: epochs decide)"),
    field("eval_every", &c::eval_every, "steps between validations (0: once an epoch); the last step always"),
    field("steps_per_call", &c::steps_per_call, "steps each actor call runs"),
    field("checkpoint_every", &c::checkpoint_every, "steps between checkpoints (0: none)"),
    field("max_failures", &c::max_failures, "worker failures survived: the failed worker is replaced from its peers' weights (async: from the servers)"),
    field("collective_timeout_s", &c::collective_timeout_s, "seconds a worker waits for a peer (allreduce, staleness bound)"),
    field("straggler_timeout_ms", &c::straggler_timeout_ms, "sync: a step goes on without gradients not in this many ms after it began (0: off)"),
    field("hierarchy", &c::hierarchy, "none | by_node | by_label: the allreduce in local groups, then across them").one_of({"none", "by_node", "by_label"}),
    list_field("local_groups", &c::local_groups, "by_label: each worker's local group, e.g. [rack1, rack1, rack2, rack2]"),
    field("sharding", &c::sharding, "equal | speed (each worker's batch and shard in proportion to its speed)").one_of({"equal", "speed"}),
    list_field("worker_speeds", &c::worker_speeds, "speed: each worker's speed, e.g. [3, 1] (empty: measured at the start)"),
    field("sharding_interval", &c::sharding_interval, "speed, measured: steps between re-measurements from compute times (0: at the start only)"),
    field("loader_threads", &c::loader_threads, "each worker's data-loader threads"),
    field("prefetch", &c::prefetch, "batches each worker's loader assembles ahead"),
    field("loader_cost_ms", &c::loader_cost_ms, "busy ms added to each batch's assembly (a slow loader, to see data-wait)"),
    field("mode", &c::mode, "sync (allreduce) | async (parameter servers) | hybrid (sync, then async)").one_of({"sync", "async", "hybrid"}),
    field("staleness", &c::staleness, "async: steps a worker may run ahead of the slowest (0: lockstep)"),
    field("num_servers", &c::num_servers, "async: parameter-server actors, one shard of the parameters each"),
    field("hybrid_sync_steps", &c::hybrid_sync_steps, "hybrid: synchronous steps before async (0: plateau rule only)"),
    field("hybrid_plateau_window", &c::hybrid_plateau_window, "hybrid: switch once the mean loss of the last N steps is barely below the N before (0: off)"),
    field("hybrid_plateau_tolerance", &c::hybrid_plateau_tolerance, "hybrid: barely = less than this fraction lower (0.02: 2%)"),
    field("target_accuracy", &c::target_accuracy, "stop once a validation reaches this accuracy (0: off)"),
    field("seed", &c::seed, "seeds the initial weights and the batches' order"),
    field("progress_interval", &c::progress_interval, "seconds between progress lines"),
  }};
  return all;
}

namespace {

template <class T>
bool one_of(const T& v, std::initializer_list<T> options) {
  return std::find(options.begin(), options.end(), v) != options.end();
}

} // namespace

std::string key_help() { return config_keys().help(); }

expected<train_config> parse_config(std::string_view text, std::string_view source) {
  return config_keys().parse(text, source);
}

expected<train_config> load_config_file(const std::string& path) { return config_keys().load_file(path); }

expected<void> validate(const train_config& cfg) {
  auto bad = [](std::string_view key, std::string what) {
    return invalid("key '" + std::string(key) + "' " + std::move(what));
  };
  // The keys' own choices (mode: sync | async | hybrid, ...), then what spans keys.
  if (auto ok = config_keys().check_choices(cfg); !ok) return ok;
  if (cfg.name.empty() || cfg.name.find('/') != std::string::npos)
    return bad("name", "must be a non-empty name without '/' (use output for a path)");
  if (cfg.data.starts_with("records:")) {
    if (cfg.data == "records:")
      return bad("data", "is 'records:' without a directory: use records:<dir>, <dir> the output directory of "
                        "celer-preprocess");
  } else if (!one_of<std::string>(cfg.data, {"digits", "fashion-mnist", "fortunes"})) {
    return bad("data", "is '" + cfg.data + "': use digits, fashion-mnist, fortunes or records:<dir> (a celer-preprocess "
                                           "output directory)");
  }
  if (cfg.num_workers < 1 || cfg.num_workers > 256) return bad("num_workers", "must be 1 to 256");
  if (cfg.cpus_per_worker < 0) return bad("cpus_per_worker", "must be at least 0");
  if ((cfg.data == "fortunes") != (cfg.model == "transformer"))
    return bad("model", "is '" + cfg.model + "' with data " + cfg.data +
                          ": the transformer reads text (data: fortunes), mlp and cnn read images (digits, fashion-mnist) "
                          "and records (records:<dir>)");
  if (cfg.context < 1 || cfg.context > 4096) return bad("context", "must be 1 to 4096");
  if (cfg.heads < 1) return bad("heads", "must be at least 1");
  if (cfg.model == "transformer" && cfg.width % cfg.heads != 0)
    return bad("width", "is " + std::to_string(cfg.width) + ": the transformer needs a multiple of heads (" +
                          std::to_string(cfg.heads) + ")");
  if (cfg.width < 1) return bad("width", "must be at least 1");
  if (cfg.depth < 1) return bad("depth", "must be at least 1");
  if (cfg.dropout < 0 || cfg.dropout >= 1) return bad("dropout", "must be in [0, 1)");
  if (!(cfg.lr > 0)) return bad("lr", "must be above 0");
  if (cfg.weight_decay < 0) return bad("weight_decay", "must be at least 0");
  if (cfg.momentum < 0 || cfg.momentum >= 1) return bad("momentum", "must be in [0, 1)");
  if (cfg.batch_size < 1) return bad("batch_size", "must be at least 1");
  if (cfg.accumulate_steps < 1) return bad("accumulate_steps", "must be at least 1");
  if (!(cfg.topk_fraction > 0 && cfg.topk_fraction <= 1)) return bad("topk_fraction", "must be in (0, 1]");
  if (cfg.batch_size_policy == "noise_scale") {
    const std::int64_t start = cfg.batch_size * cfg.accumulate_steps * cfg.num_workers;
    const std::string why = " with batch_size_policy noise_scale: ";
    if (cfg.num_workers < 2)
      return bad("num_workers", "must be at least 2" + why +
                                  "the noise scale is estimated from each worker's gradient against the averaged one");
    if (cfg.max_batch_size < start)
      return bad("max_batch_size", "is " + std::to_string(cfg.max_batch_size) + ": below the starting batch " +
                                     std::to_string(start) + " (batch_size x accumulate_steps x num_workers)");
    if (cfg.batch_size_cooldown < 1) return bad("batch_size_cooldown", "must be at least 1");
    if (cfg.mode != "sync") return bad("mode", "is '" + cfg.mode + "'" + why + "it is built for mode: sync");
    if (cfg.compression != "none")
      return bad("compression", "is '" + cfg.compression + "'" + why +
                                  "the estimate needs the exact averaged gradient (use compression: none)");
    if (cfg.checkpoint_every > 0 || cfg.max_failures > 0)
      return bad(cfg.checkpoint_every > 0 ? "checkpoint_every" : "max_failures",
                 "must be 0" + why + "the estimator's state is not in the checkpoints yet");
  }
  if (cfg.loss_scale == "dynamic") {
    if (!(cfg.loss_scale_init >= 1.0 / 16777216.0 && cfg.loss_scale_init <= 1.7014118346046923e38))
      return bad("loss_scale_init", "must be 2^-24 to 2^127");
    if (cfg.loss_scale_growth_interval < 1) return bad("loss_scale_growth_interval", "must be at least 1");
    if (cfg.mode != "sync")
      return bad("loss_scale", "is 'dynamic' with mode " + cfg.mode +
                                 ": the parameter servers refuse a non-finite gradient and have no skipped push "
                                 "(use mode: sync)");
    if (cfg.straggler_timeout_ms > 0)
      return bad("loss_scale", "is 'dynamic' with straggler_timeout_ms: the straggler step does not scale its loss "
                               "(set one of them off)");
  }
  if (!cfg.worker_speeds.empty() && cfg.sharding != "speed")
    return bad("worker_speeds", "is given with sharding " + cfg.sharding + ": set sharding: speed, or remove it");
  if (cfg.hierarchy == "by_label") {
    if (static_cast<int>(cfg.local_groups.size()) != cfg.num_workers)
      return bad("local_groups", "has " + std::to_string(cfg.local_groups.size()) + " labels for " +
                                   std::to_string(cfg.num_workers) + " workers: hierarchy by_label needs one each");
    for (const auto& g : cfg.local_groups)
      if (g.empty()) return bad("local_groups", "holds an empty label: give each worker's group a name");
  } else if (!cfg.local_groups.empty()) {
    return bad("local_groups", "is given with hierarchy " + cfg.hierarchy + ": set hierarchy: by_label, or remove it");
  }
  if (cfg.sharding_interval < 0) return bad("sharding_interval", "must be at least 0");
  if (cfg.sharding == "speed") {
    const std::string why = " with sharding speed: ";
    if (cfg.num_workers < 2) return bad("num_workers", "must be at least 2" + why + "one worker has nothing to share");
    if (!cfg.worker_speeds.empty()) {
      if (static_cast<int>(cfg.worker_speeds.size()) != cfg.num_workers)
        return bad("worker_speeds", "has " + std::to_string(cfg.worker_speeds.size()) + " speeds for " +
                                      std::to_string(cfg.num_workers) + " workers: give one each, or none to measure them");
      for (double v : cfg.worker_speeds)
        if (!(v > 0) || !std::isfinite(v)) return bad("worker_speeds", "holds " + std::to_string(v) + ": each must be above 0");
    }
    if (cfg.mode != "sync")
      return bad("sharding", "is 'speed' with mode " + cfg.mode +
                               ": in asynchronous training a fast worker already takes more steps (use mode: sync)");
    if (cfg.batch_size_policy != "fixed")
      return bad("sharding", "is 'speed' with batch_size_policy " + cfg.batch_size_policy +
                               ": the noise scale assumes equal batches (use batch_size_policy: fixed)");
    if (cfg.straggler_timeout_ms > 0)
      return bad("sharding", "is 'speed' with straggler_timeout_ms: set one of them off (speed shares make "
                             "stragglers rarer; the straggler step takes equal batches)");
  }
  if (!(cfg.clip_grad_norm >= 0)) return bad("clip_grad_norm", "must be at least 0 (0: no clipping)");
  if (cfg.epochs < 1 && cfg.max_steps < 1) return bad("epochs", "must be at least 1 (or set max_steps)");
  if (cfg.max_steps < 0) return bad("max_steps", "must be at least 0");
  if (cfg.eval_every < 0) return bad("eval_every", "must be at least 0");
  if (cfg.steps_per_call < 1) return bad("steps_per_call", "must be at least 1");
  if (cfg.checkpoint_every < 0) return bad("checkpoint_every", "must be at least 0");
  if (cfg.max_failures < 0) return bad("max_failures", "must be at least 0");
  if (!(cfg.collective_timeout_s > 0)) return bad("collective_timeout_s", "must be above 0");
  if (cfg.straggler_timeout_ms < 0 || cfg.straggler_timeout_ms > 3'600'000)
    return bad("straggler_timeout_ms", "must be 0 to 3600000");
  if (cfg.straggler_timeout_ms > 0 && cfg.mode != "sync")
    return bad("straggler_timeout_ms", "must be 0 with mode " + cfg.mode + ": it is built for the allreduce (mode: sync)");
  if (cfg.straggler_timeout_ms > 0 && cfg.compression != "none")
    return bad("straggler_timeout_ms", "must be 0 with compression " + cfg.compression +
                                         ": a worker left out has no packet to send (use compression: none)");
  if (cfg.straggler_timeout_ms > 0 && (cfg.model == "transformer" || cfg.precision != "fp32" ||
                                       cfg.batch_size_policy != "fixed"))
    return bad("straggler_timeout_ms", "must be 0 with model " + cfg.model + ", precision " + cfg.precision +
                                         " and batch_size_policy " + cfg.batch_size_policy +
                                         ": its step thread runs the plain fp32 step of the MLP or CNN at a fixed batch");
  if (cfg.loader_threads < 1) return bad("loader_threads", "must be at least 1");
  if (cfg.prefetch < 1) return bad("prefetch", "must be at least 1");
  if (!(cfg.loader_cost_ms >= 0 && cfg.loader_cost_ms < 60'000)) return bad("loader_cost_ms", "must be 0 to 60000");
  if (!(cfg.progress_interval >= 0)) return bad("progress_interval", "must be at least 0");
  if (cfg.staleness < 0 || cfg.staleness > 1'000'000) return bad("staleness", "must be 0 to 1000000");
  if (cfg.num_servers < 1 || cfg.num_servers > 256) return bad("num_servers", "must be 1 to 256");
  if (cfg.hybrid_sync_steps < 0) return bad("hybrid_sync_steps", "must be at least 0");
  if (cfg.hybrid_plateau_window < 0) return bad("hybrid_plateau_window", "must be at least 0");
  if (!(cfg.hybrid_plateau_tolerance >= 0 && cfg.hybrid_plateau_tolerance < 1))
    return bad("hybrid_plateau_tolerance", "must be in [0, 1)");
  if (cfg.mode == "hybrid" && cfg.hybrid_sync_steps == 0 && cfg.hybrid_plateau_window == 0)
    return bad("hybrid_sync_steps", "and hybrid_plateau_window are both 0: hybrid needs a rule to switch by");
  if (!(cfg.target_accuracy >= 0 && cfg.target_accuracy <= 1)) return bad("target_accuracy", "must be 0 to 1");
  // What the parameter servers do not do (apps/train/README.md, "Limits").
  if (cfg.mode != "sync") {
    const std::string why = " with mode " + cfg.mode + ": ";
    if (cfg.compression != "none")
      return bad("compression", "is '" + cfg.compression + "'" + why +
                                  "compression works on the allreduce; the parameter servers take float32 gradients "
                                  "(use compression: none, or mode: sync)");
  }
  return {};
}

std::string to_json(const train_config& cfg) { return config_keys().to_json(cfg); }

std::string output_dir(const train_config& cfg) {
  return cfg.output.empty() ? "celer_results/" + cfg.name : cfg.output;
}

} // namespace celer::train_app
