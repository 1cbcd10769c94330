// Reading, checking and writing an experiment's configuration (config.hpp).
#include "config.hpp"

#include <celer/apps/config_schema.hpp>

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace celer::tune_app {
namespace {

error invalid(std::string message) { return error(error_code::invalid_argument, std::move(message)); }

/// The synthetic trainable's `data` (synthetic.hpp); every other names a data set that
/// a model trial (trial.hpp) trains on.
constexpr std::string_view synthetic_data = "synthetic";

/// A figure a trainable reports each epoch, and which way is better.
struct metric_rule {
  std::string_view name;
  tune::direction mode;
};

/// The figures `data`'s trials report (epoch_metrics::values); the first is the default metric.
const std::vector<metric_rule>& metrics(std::string_view data) {
  using d = tune::direction;
  static const std::vector<metric_rule> model = {
    {"val_accuracy", d::maximize}, {"val_loss", d::minimize}, {"train_accuracy", d::maximize}, {"train_loss", d::minimize}};
  static const std::vector<metric_rule> synthetic = {{"score", d::maximize}};
  return data == synthetic_data ? synthetic : model;
}

const metric_rule* metric_of(std::string_view data, std::string_view name) {
  for (const auto& m : metrics(data))
    if (m.name == name) return &m;
  return nullptr;
}

/// What a trainable parameter takes, and its value when the search space leaves it out.
struct param_rule {
  std::string_view name;
  enum class type : unsigned char { real, integer, text } kind;
  double low;
  double high;
  bool low_open;   // the low bound itself is not allowed
  bool high_open;  // nor the high one
  std::vector<std::string_view> texts;
  tune::value fallback;
  std::string_view what;
};

/// The parameters `data`'s trials take: the model trial's, or the synthetic trainable's.
const std::vector<param_rule>& rules(std::string_view data) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  using t = param_rule::type;
  static const std::vector<param_rule> model = {
    {"lr", t::real, 0, inf, true, false, {}, 1e-3, "learning rate, > 0"},
    {"weight_decay", t::real, 0, inf, false, false, {}, 0.0, "L2 penalty, >= 0"},
    {"momentum", t::real, 0, 1, false, true, {}, 0.9, "SGD's momentum, in [0, 1)"},
    {"dropout", t::real, 0, 1, false, true, {}, 0.0, "dropout probability, in [0, 1)"},
    {"width", t::integer, 1, 4096, false, false, {}, std::int64_t{128}, "units per hidden layer (cnn: channels), 1..4096"},
    {"depth", t::integer, 1, 8, false, false, {}, std::int64_t{2}, "hidden layers (cnn: conv blocks), 1..8"},
    {"batch_size", t::integer, 1, 65536, false, false, {}, std::int64_t{64}, "samples per step, 1..65536"},
    {"optimizer", t::text, 0, 0, false, false, {"sgd", "adam", "adamw"}, std::string("adam"), "sgd, adam or adamw"},
    {"model", t::text, 0, 0, false, false, {"mlp", "cnn"}, std::string("mlp"), "mlp or cnn"},
  };
  // The same trainable as bench/peers/ray_tune_synthetic.py's, whose param_space names i and
  // cost_ms alike.
  static const std::vector<param_rule> synthetic = {
    {"i", t::integer, 0, 1e9, false, false, {}, std::int64_t{0}, "its point: the Halton sequence at index i + 1, 0..1e9"},
    {"cost_ms", t::real, 0, 60'000, false, false, {}, 20.0, "CPU spun per iteration (ms), 0..60000"},
  };
  return data == synthetic_data ? synthetic : model;
}

const param_rule* rule_of(std::string_view data, std::string_view name) {
  for (const auto& r : rules(data))
    if (r.name == name) return &r;
  return nullptr;
}

std::string join(const std::vector<std::string_view>& names) {
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

/// "<source>:<line>: unknown key 'x' <where>. Did you mean 'y'? Valid keys: ...".
error unknown_key(std::string_view source, const YAML::Node& key, std::string_view where,
                  const std::vector<std::string_view>& valid) {
  return invalid(std::string(source) + ":" + std::to_string(key.Mark().line + 1) + ": " +
                 apps::unknown_key_message(key.as<std::string>(), where, valid));
}

/// Reads a scalar as the value type it spells: an integer, else a real, else a string
/// (quoted scalars stay strings).
tune::value scalar_value(const YAML::Node& n) {
  const auto text = n.Scalar();
  if (n.Tag() != "!") {
    std::int64_t i = 0;
    double d = 0;
    if (YAML::convert<std::int64_t>::decode(n, i)) return i;
    if (YAML::convert<double>::decode(n, d)) return d;
  }
  return text;
}

/// Reads the YAML document into a config; every reader reports the key and the line.
class reader {
public:
  explicit reader(std::string_view source) : source_(source) {}

  error bad(const YAML::Node& n, std::string_view key, std::string_view wanted) const {
    std::string got = n.IsScalar() ? "'" + n.Scalar() + "'" : n.IsSequence() ? "a list" : "a mapping";
    return invalid(std::string(source_) + ":" + std::to_string(n.Mark().line + 1) + ": " + std::string(key) +
                   " must be " + std::string(wanted) + ", not " + got);
  }

  template <class T>
  expected<void> number(const YAML::Node& n, std::string_view key, T& out, std::string_view wanted) const {
    T v{};
    if (!n.IsScalar() || !YAML::convert<T>::decode(n, v)) return bad(n, key, wanted);
    out = v;
    return {};
  }
  expected<void> text(const YAML::Node& n, std::string_view key, std::string& out) const {
    if (!n.IsScalar()) return bad(n, key, "a string");
    out = n.Scalar();
    return {};
  }
  expected<void> boolean(const YAML::Node& n, std::string_view key, bool& out) const {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) return bad(n, key, "true or false");
    out = v;
    return {};
  }

  expected<void> searcher(const YAML::Node& n, searcher_config& s) const {
    if (n.IsScalar()) return text(n, "searcher", s.name);
    if (!n.IsMap()) return bad(n, "searcher", "a name (random, grid, tpe) or a mapping with 'name'");
    const std::vector<std::string_view> valid = {"name", "n_startup_trials", "multivariate"};
    for (auto it : n) {
      const auto key = it.first.as<std::string>();
      expected<void> ok;
      if (key == "name") ok = text(it.second, "searcher.name", s.name);
      else if (key == "n_startup_trials") ok = number(it.second, "searcher.n_startup_trials", s.n_startup_trials, "a whole number");
      else if (key == "multivariate") ok = boolean(it.second, "searcher.multivariate", s.multivariate);
      else return unknown_key(source_, it.first, "in 'searcher'", valid);
      if (!ok) return ok;
    }
    return {};
  }

  expected<void> scheduler(const YAML::Node& n, scheduler_config& s) const {
    if (n.IsScalar()) return text(n, "scheduler", s.name);
    if (!n.IsMap()) return bad(n, "scheduler", "a name (fifo, asha, median, pbt) or a mapping with 'name'");
    const std::vector<std::string_view> valid = {
      "name", "grace_period", "reduction_factor", "min_samples_required", "use_running_mean",
      "perturbation_interval", "burn_in_period", "quantile_fraction", "resample_probability", "mutations"};
    for (auto it : n) {
      const auto key = it.first.as<std::string>();
      const auto& v = it.second;
      const std::string where = "scheduler." + key;
      expected<void> ok;
      if (key == "name") ok = text(v, where, s.name);
      else if (key == "grace_period") ok = number(v, where, s.grace_period, "a whole number of epochs");
      else if (key == "reduction_factor") ok = number(v, where, s.reduction_factor, "a number > 1");
      else if (key == "min_samples_required") ok = number(v, where, s.min_samples_required, "a whole number");
      else if (key == "use_running_mean") ok = boolean(v, where, s.use_running_mean);
      else if (key == "perturbation_interval") ok = number(v, where, s.perturbation_interval, "a whole number of epochs");
      else if (key == "burn_in_period") ok = number(v, where, s.burn_in_period, "a whole number of epochs");
      else if (key == "quantile_fraction") ok = number(v, where, s.quantile_fraction, "a number in [0, 0.5]");
      else if (key == "resample_probability") ok = number(v, where, s.resample_probability, "a number in [0, 1]");
      else if (key == "mutations") {
        if (!v.IsSequence()) return bad(v, where, "a list of parameter names");
        s.mutations.clear();
        for (auto m : v) s.mutations.push_back(m.Scalar());
      } else {
        return unknown_key(source_, it.first, "in 'scheduler'", valid);
      }
      if (!ok) return ok;
    }
    return {};
  }

  expected<void> space(const YAML::Node& n, std::string_view data, std::vector<param_spec>& out) const {
    if (!n.IsMap()) return bad(n, "search_space", "a mapping of parameter names to distributions");
    std::vector<std::string_view> names;
    for (const auto& r : rules(data)) names.push_back(r.name);
    const std::vector<std::string_view> kinds = {"uniform", "loguniform", "int",    "log_int",
                                                 "randint", "choice",     "grid_search"};
    out.clear();
    for (auto it : n) {
      const auto name = it.first.as<std::string>();
      if (!rule_of(data, name))
        return unknown_key(source_, it.first, "in 'search_space' (not a parameter a " + std::string(data) + " trial has)", names);
      param_spec p{name, "fixed", {}};
      const auto& v = it.second;
      if (v.IsScalar()) {
        p.values.push_back(scalar_value(v));
      } else if (v.IsMap() && v.size() == 1) {
        auto kv = *v.begin();
        p.kind = kv.first.as<std::string>();
        if (p.kind == "grid") p.kind = "grid_search";  // celer::tune's own spelling
        if (std::find(kinds.begin(), kinds.end(), p.kind) == kinds.end())
          return unknown_key(source_, kv.first, "as the distribution of '" + name + "'", kinds);
        if (!kv.second.IsSequence()) return bad(kv.second, name + "." + p.kind, "a list, e.g. [1e-4, 0.1]");
        for (auto x : kv.second) {
          if (!x.IsScalar()) return bad(x, name + "." + p.kind, "a list of numbers or strings");
          p.values.push_back(scalar_value(x));
        }
      } else {
        return bad(v, "search_space." + name,
                   "a fixed value or one distribution, e.g. {loguniform: [1e-4, 0.1]} or {choice: [32, 64]}");
      }
      out.push_back(std::move(p));
    }
    return {};
  }

  expected<void> memory_by_batch(const YAML::Node& v, std::map<std::int64_t, double>& out) const {
    const std::string_view key = "gpu_memory_gb_by_batch";
    if (!v.IsMap()) return bad(v, key, "a mapping of batch sizes to GB, e.g. {256: 8}");
    out.clear();
    for (auto kv : v) {
      std::int64_t batch = 0;
      double gb = 0;
      if (!YAML::convert<std::int64_t>::decode(kv.first, batch)) return bad(kv.first, key, "keyed by batch sizes");
      if (!YAML::convert<double>::decode(kv.second, gb)) return bad(kv.second, key, "a mapping to numbers of GB");
      out[batch] = gb;
    }
    return {};
  }

private:
  std::string source_;
};

nlohmann::ordered_json json_of(const tune::value& v) {
  nlohmann::ordered_json j;
  std::visit([&](const auto& x) { j = x; }, v);
  return j;
}

bool is_number(const tune::value& v) { return !std::holds_alternative<std::string>(v); }
double as_number(const tune::value& v) {
  if (auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

/// Whether `v` is a value parameter `r` can take; the reason when not.
std::string refuse(const param_rule& r, const tune::value& v) {
  using t = param_rule::type;
  if (r.kind == t::text) {
    auto* s = std::get_if<std::string>(&v);
    if (s && std::find(r.texts.begin(), r.texts.end(), *s) != r.texts.end()) return {};
    return tune::to_string(v) + " is not one of " + join(r.texts);
  }
  if (!is_number(v)) return tune::to_string(v) + " is not a number";
  if (r.kind == t::integer && !std::holds_alternative<std::int64_t>(v))
    return tune::to_string(v) + " is not a whole number";
  const double x = as_number(v);
  if (!std::isfinite(x) || x < r.low || (r.low_open && x == r.low) || x > r.high || (r.high_open && x == r.high))
    return tune::to_string(v) + " is out of range (" + std::string(r.what) + ")";
  return {};
}

expected<void> check_param(std::string_view data, const param_spec& p) {
  const param_rule& r = *rule_of(data, p.name);
  const std::string where = "search_space." + p.name;
  using t = param_rule::type;
  const bool ranged = p.kind == "uniform" || p.kind == "loguniform" || p.kind == "int" || p.kind == "log_int" ||
                      p.kind == "randint";
  if (ranged) {
    if (r.kind == t::text) return invalid(where + ": " + p.kind + " is for numbers; '" + p.name + "' takes a choice of " + join(r.texts));
    const bool integral = p.kind == "int" || p.kind == "log_int" || p.kind == "randint";
    if (integral != (r.kind == t::integer))
      return invalid(where + ": '" + p.name + "' is " + (integral ? "a real number: use uniform or loguniform" : "a whole number: use int, log_int or randint"));
    if (p.values.size() != 2) return invalid(where + ": " + p.kind + " takes two bounds, [low, high]");
    for (const auto& v : p.values)
      if (auto why = refuse(r, v); !why.empty()) return invalid(where + ": " + why);
    const double high = as_number(p.values[1]) - (p.kind == "randint" ? 1 : 0);  // Ray's randint excludes high
    if (!(as_number(p.values[0]) < high))
      return invalid(where + ": the low bound must be below the high one" +
                     std::string(p.kind == "randint" ? " (randint's high is excluded, as in Ray: use int for [low, high])" : ""));
    if ((p.kind == "loguniform" || p.kind == "log_int") && !(as_number(p.values[0]) > 0))
      return invalid(where + ": " + p.kind + " needs a low bound > 0");
    return {};
  }
  if (p.values.empty()) return invalid(where + ": " + p.kind + " needs at least one value");
  if (p.kind == "fixed" && p.values.size() != 1) return invalid(where + ": a fixed value is one value");
  for (const auto& v : p.values)
    if (auto why = refuse(r, v); !why.empty()) return invalid(where + ": " + why);
  return {};
}

} // namespace

const apps::config_schema<experiment_config>& config_keys() {
  using c = experiment_config;
  using node = const YAML::Node&;
  static const apps::config_schema<experiment_config> keys{{
    apps::field("name", &c::name, "the experiment's name: its output directory is ./celer_results/<name>"),
    apps::field("data", &c::data, "digits | fashion-mnist | synthetic (no model: a known curve)").kept_on_resume(),
    apps::field("limit", &c::limit, "use only the first N samples (0: all)").kept_on_resume(),
    apps::field("metric", &c::metric,
                "val_accuracy | val_loss | train_accuracy | train_loss (synthetic: score); default: the data's first")
      .kept_on_resume(),
    apps::field("num_samples", &c::num_samples, "trials in all (grid: passes over the grid)"),
    apps::field("max_concurrent", &c::max_concurrent, "trials at once (0: as many as the CPUs and GPUs allow)"),
    apps::field("max_epochs", &c::max_epochs, "epochs a trial runs at most").kept_on_resume(),
    apps::field("seed", &c::seed, "seeds the searcher, the scheduler and the trials").kept_on_resume(),
    apps::section<c>(
      "searcher", "random | grid | tpe, or {name: tpe, n_startup_trials: 10, multivariate: true}",
      [](node n, c& x, std::string_view source) { return reader(source).searcher(n, x.searcher); },
      [](const c& x, nlohmann::ordered_json& j) {
        j["searcher"] = {{"name", x.searcher.name},
                         {"n_startup_trials", x.searcher.n_startup_trials},
                         {"multivariate", x.searcher.multivariate}};
      })
      .named_by(&c::searcher, &searcher_config::name)
      .kept_on_resume(),
    apps::section<c>(
      "scheduler", "fifo | asha | median | pbt, or {name: asha, grace_period: 1, reduction_factor: 3, ...}",
      [](node n, c& x, std::string_view source) { return reader(source).scheduler(n, x.scheduler); },
      [](const c& x, nlohmann::ordered_json& j) {
        const auto& s = x.scheduler;
        j["scheduler"] = {{"name", s.name},
                          {"grace_period", s.grace_period},
                          {"reduction_factor", s.reduction_factor},
                          {"min_samples_required", s.min_samples_required},
                          {"use_running_mean", s.use_running_mean},
                          {"perturbation_interval", s.perturbation_interval},
                          {"burn_in_period", s.burn_in_period},
                          {"quantile_fraction", s.quantile_fraction},
                          {"resample_probability", s.resample_probability},
                          {"mutations", s.mutations}};
      })
      .named_by(&c::scheduler, &scheduler_config::name)
      .kept_on_resume(),
    apps::field("cpus_per_trial", &c::cpus_per_trial, "CPUs each trial holds (fractions allowed)").kept_on_resume(),
    apps::field("gpus_per_trial", &c::gpus_per_trial, "GPUs each trial holds (fractions share one)").kept_on_resume(),
    apps::field("gpu_memory_gb", &c::gpu_memory_gb, "the least memory (GB) of the GPU a trial is given")
      .kept_on_resume(),
    apps::section<c>(
      "gpu_memory_gb_by_batch", "{256: 8} asks 8 GB for trials whose batch_size is at least 256",
      [](node n, c& x, std::string_view source) { return reader(source).memory_by_batch(n, x.gpu_memory_gb_by_batch); },
      [](const c& x, nlohmann::ordered_json& j) {
        auto by_batch = nlohmann::ordered_json::object();
        for (auto [batch, gb] : x.gpu_memory_gb_by_batch) by_batch[std::to_string(batch)] = gb;
        j["gpu_memory_gb_by_batch"] = by_batch;
      }),
    apps::field("max_failures", &c::max_failures, "failures a trial survives (from its checkpoint) before it is ERROR"),
    apps::field("checkpoint_every", &c::checkpoint_every, "epochs between checkpoints (0: none)"),
    apps::field("keep_checkpoints", &c::keep_checkpoints, "checkpoints kept per trial"),
    apps::field("progress_interval", &c::progress_interval, "seconds between redraws of the progress table"),
    apps::field("output", &c::output, "the experiment directory (default ./celer_results/<name>)"),
    apps::section<c>(
      "search_space", "the parameters: a distribution each ({loguniform: [1e-4, 0.1]}) or a fixed value",
      [](node n, c& x, std::string_view source) { return reader(source).space(n, x.data, x.search_space); },
      [](const c& x, nlohmann::ordered_json& j) {
        auto space = nlohmann::ordered_json::object();
        for (const auto& p : x.search_space) {
          if (p.kind == "fixed") {
            space[p.name] = json_of(p.values.front());
          } else {
            auto values = nlohmann::ordered_json::array();
            for (const auto& v : p.values) values.push_back(json_of(v));
            space[p.name] = {{p.kind, values}};
          }
        }
        j["search_space"] = space;
      }),
  }};
  return keys;
}

expected<experiment_config> parse_config(std::string_view text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return invalid(std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  experiment_config c;
  if (root.IsNull()) return c;
  if (!root.IsMap()) return invalid(std::string(source) + ": a config is a mapping of keys (see celer-tune --help)");
  try {
    // The search space's parameters and the default metric are the data's trainable's: the
    // data is read first, wherever the file has it.
    if (auto data = root["data"]; data) {
      if (auto ok = reader(source).text(data, "data", c.data); !ok) return ok.error();
    }
    if (!root["metric"]) c.metric = std::string(metrics(c.data).front().name);
    return config_keys().parse(text, source, std::move(c));
  } catch (const YAML::Exception& e) {
    return invalid(std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

expected<experiment_config> load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return error(error_code::not_found,
                 "cannot read the config file " + path + " (the shipped ones are in config/tune/)");
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

expected<void> validate(const experiment_config& c) {
  if (c.name.empty() || c.name.find('/') != std::string::npos)
    return invalid("name must be a non-empty name without '/' (it names the output directory), not '" + c.name + "'");
  if (c.data != "digits" && c.data != "fashion-mnist" && c.data != synthetic_data)
    return invalid("data must be digits, fashion-mnist or synthetic, not '" + c.data + "'");
  if (!metric_of(c.data, c.metric)) {
    std::vector<std::string_view> names;
    for (const auto& m : metrics(c.data)) names.push_back(m.name);
    return invalid("metric must be one that " + c.data + " trials report: " + join(names) + "; not '" + c.metric + "'");
  }
  if (c.num_samples < 1) return invalid("num_samples must be at least 1");
  if (c.max_concurrent < 0) return invalid("max_concurrent must be >= 0 (0: as many as the CPUs allow)");
  if (c.max_epochs < 1) return invalid("max_epochs must be at least 1");
  if (!(c.cpus_per_trial > 0)) return invalid("cpus_per_trial must be > 0 (fractions are allowed)");
  if (c.gpus_per_trial < 0 || (c.gpus_per_trial > 1 && c.gpus_per_trial != std::floor(c.gpus_per_trial)))
    return invalid("gpus_per_trial must be a fraction up to 1, or a whole number, not " + std::to_string(c.gpus_per_trial));
  if (c.gpu_memory_gb < 0) return invalid("gpu_memory_gb must be >= 0");
  if (c.max_failures < 0) return invalid("max_failures must be >= 0");
  if (c.checkpoint_every < 0) return invalid("checkpoint_every must be >= 0 (0: never)");
  if (c.keep_checkpoints < 1) return invalid("keep_checkpoints must be at least 1");
  if (!(c.progress_interval > 0)) return invalid("progress_interval must be > 0 seconds");
  const std::vector<std::string_view> searchers = {"random", "grid", "tpe"};
  if (std::find(searchers.begin(), searchers.end(), c.searcher.name) == searchers.end())
    return invalid("searcher must be one of " + join(searchers) + ", not '" + c.searcher.name + "'");
  const std::vector<std::string_view> schedulers = {"fifo", "asha", "median", "pbt"};
  if (std::find(schedulers.begin(), schedulers.end(), c.scheduler.name) == schedulers.end())
    return invalid("scheduler must be one of " + join(schedulers) + ", not '" + c.scheduler.name + "'");
  std::set<std::string> seen;
  bool searched = false;
  for (const auto& p : c.search_space) {
    if (!rule_of(c.data, p.name)) {
      std::vector<std::string_view> names;
      for (const auto& r : rules(c.data)) names.push_back(r.name);
      return invalid("search_space: '" + p.name + "' is not a parameter " + c.data + " trials take (" + join(names) + ")");
    }
    if (!seen.insert(p.name).second) return invalid("search_space: '" + p.name + "' is declared twice");
    if (auto ok = check_param(c.data, p); !ok) return ok;
    searched = searched || p.kind != "fixed";
  }
  if (!searched) return invalid("search_space declares no distribution to search: give at least one, e.g. lr: {loguniform: [1e-4, 0.1]}");
  if (c.searcher.name == "grid" &&
      std::none_of(c.search_space.begin(), c.search_space.end(), [](auto& p) { return p.kind == "grid_search"; }))
    return invalid("the grid searcher needs at least one {grid_search: [...]} parameter in search_space");
  if (c.scheduler.name == "pbt") {
    const std::vector<std::string_view> mutable_params = {"lr", "weight_decay", "momentum", "batch_size"};
    if (c.scheduler.mutations.empty()) return invalid("scheduler.mutations must name at least one parameter for PBT");
    for (const auto& m : c.scheduler.mutations) {
      if (std::find(mutable_params.begin(), mutable_params.end(), m) == mutable_params.end())
        return invalid("scheduler.mutations: PBT cannot change '" + m + "' in a running trial (its model or optimiser would not fit the copied state); it may change " + join(mutable_params));
      auto it = std::find_if(c.search_space.begin(), c.search_space.end(), [&](auto& p) { return p.name == m; });
      if (it == c.search_space.end() || it->kind == "fixed")
        return invalid("scheduler.mutations: '" + m + "' needs a distribution in search_space for PBT to draw from");
    }
  }
  if (auto made = make_searcher(c); !made) return made.error();
  if (auto made = make_scheduler(c); !made) return made.error();
  return {};
}

std::string to_json(const experiment_config& c) { return config_keys().to_json(c); }

std::string output_dir(const experiment_config& c) {
  return c.output.empty() ? "celer_results/" + c.name : c.output;
}

tune::search_space make_search_space(const experiment_config& c) {
  tune::search_space space;
  for (const auto& p : c.search_space) {
    const bool ranged = p.values.size() == 2 && is_number(p.values[0]) && is_number(p.values[1]);
    const auto low = ranged ? as_number(p.values[0]) : 0.0;
    const auto high = ranged ? as_number(p.values[1]) : 0.0;
    if (p.kind == "uniform") space.uniform(p.name, low, high);
    else if (p.kind == "loguniform") space.log_uniform(p.name, low, high);
    else if (p.kind == "int") space.integer(p.name, static_cast<std::int64_t>(low), static_cast<std::int64_t>(high));
    else if (p.kind == "log_int") space.integer(p.name, static_cast<std::int64_t>(low), static_cast<std::int64_t>(high), true);
    else if (p.kind == "randint") space.integer(p.name, static_cast<std::int64_t>(low), static_cast<std::int64_t>(high) - 1);
    else if (p.kind == "choice") space.categorical(p.name, p.values);
    else if (p.kind == "grid_search") space.grid(p.name, p.values);
  }
  return space;
}

tune::params fixed_params(const experiment_config& c) {
  tune::params out;
  for (const auto& r : rules(c.data)) out.set(std::string(r.name), r.fallback);
  for (const auto& p : c.search_space) {
    if (p.kind == "fixed") {
      out.set(p.name, p.values.front());
    } else {
      // Searched: every trial gets its own value; not a fixed one.
      tune::params rest;
      for (const auto& [name, v] : out)
        if (name != p.name) rest.set(name, v);
      out = rest;
    }
  }
  return out;
}

std::size_t planned_trials(const experiment_config& c) {
  if (c.searcher.name != "grid") return c.num_samples;
  std::size_t points = 1;
  for (const auto& p : c.search_space)
    if (p.kind == "grid_search") points *= p.values.size();
  return points * c.num_samples;
}

tune::direction metric_mode(const experiment_config& c) {
  const auto* m = metric_of(c.data, c.metric);
  return m ? m->mode : tune::direction::maximize;  // validate() refuses an unknown metric
}

expected<std::unique_ptr<tune::searcher>> make_searcher(const experiment_config& c) {
  const auto space = make_search_space(c);
  const tune::search_options options{.mode = metric_mode(c), .seed = c.seed, .num_samples = c.num_samples};
  if (c.searcher.name == "random") return tune::make_random_search(space, options);
  if (c.searcher.name == "grid") return tune::make_grid_search(space, options);
  return tune::make_tpe_search(space, options,
                               {.n_startup_trials = c.searcher.n_startup_trials, .multivariate = c.searcher.multivariate});
}

expected<std::unique_ptr<tune::scheduler>> make_scheduler(const experiment_config& c) {
  const auto& s = c.scheduler;
  const auto mode = metric_mode(c);
  if (s.name == "fifo") return tune::make_fifo();
  if (s.name == "asha")
    return tune::make_asha({.mode = mode, .max_t = c.max_epochs, .grace_period = s.grace_period,
                            .reduction_factor = s.reduction_factor});
  if (s.name == "median")
    return tune::make_median_stopping({.mode = mode, .grace_period = s.grace_period,
                                       .min_samples_required = s.min_samples_required,
                                       .use_running_mean = s.use_running_mean});
  tune::search_space mutations;
  const auto space = make_search_space(c);
  for (const auto& name : s.mutations) {
    const auto* p = space.find(name);
    if (!p) continue;  // validate() names it
    if (p->kind == tune::distribution::uniform) mutations.uniform(p->name, p->low, p->high);
    else if (p->kind == tune::distribution::log_uniform) mutations.log_uniform(p->name, p->low, p->high);
    else if (p->integral()) mutations.integer(p->name, static_cast<std::int64_t>(p->low), static_cast<std::int64_t>(p->high), p->log());
    else mutations.categorical(p->name, p->choices);
  }
  return tune::make_pbt(mutations, {.mode = mode,
                                    .perturbation_interval = s.perturbation_interval,
                                    .burn_in_period = s.burn_in_period,
                                    .quantile_fraction = s.quantile_fraction,
                                    .resample_probability = s.resample_probability,
                                    .seed = c.seed});
}

double gpu_memory_for(const experiment_config& c, const tune::params& p) {
  double gb = c.gpu_memory_gb;
  auto batch = p.integer("batch_size");
  if (!batch) return gb;
  for (auto [at_least, need] : c.gpu_memory_gb_by_batch)
    if (*batch >= at_least) gb = std::max(gb, need);
  return gb;
}

std::string parameter_help() {
  std::string out;
  for (std::string_view data : {std::string_view("digits"), synthetic_data}) {
    out += data == synthetic_data ? "  data: synthetic (no model: a known learning curve, a fixed cost per iteration)\n"
                                  : "  data: digits, fashion-mnist (a LibTorch model)\n";
    for (const auto& r : rules(data)) {
      std::string name(r.name);
      name.resize(std::max<std::size_t>(name.size(), 13), ' ');
      out += "    " + name + std::string(r.what) + " (default " + tune::to_string(r.fallback) + ")\n";
    }
    std::vector<std::string_view> names;
    for (const auto& m : metrics(data)) names.push_back(m.name);
    out += "    metric: " + join(names) + "\n";
  }
  return out;
}

} // namespace celer::tune_app
