// Trials, states and results (experiment.hpp).
#include "experiment.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <limits>

namespace celer::tune_app {

std::string_view to_string(trial_state s) noexcept {
  switch (s) {
    case trial_state::pending: return "PENDING";
    case trial_state::running: return "RUNNING";
    case trial_state::terminated: return "TERMINATED";
    case trial_state::stopped: return "STOPPED";
    case trial_state::error: return "ERROR";
  }
  return "?";
}

std::optional<trial_state> trial_state_from(std::string_view s) noexcept {
  for (auto t : {trial_state::pending, trial_state::running, trial_state::terminated, trial_state::stopped,
                 trial_state::error})
    if (to_string(t) == s) return t;
  return std::nullopt;
}

namespace {
/// JSON has no NaN: a NaN figure (a diverged loss) is written as null and read back as NaN.
nlohmann::ordered_json number(double d) {
  return std::isfinite(d) ? nlohmann::ordered_json(d) : nlohmann::ordered_json(nullptr);
}
double number_of(const nlohmann::ordered_json& j) {
  return j.is_number() ? j.get<double>() : std::numeric_limits<double>::quiet_NaN();
}
} // namespace

std::string to_json_line(const epoch_result& r) {
  nlohmann::ordered_json j;
  j["epoch"] = r.epoch;
  for (const auto& [name, v] : r.values) j[name] = number(v);
  j["seconds"] = number(r.seconds);
  if (!r.restored_why.empty()) {
    j["restored_from"] = {{"why", r.restored_why}, {"trial", r.restored_trial}, {"epoch", r.restored_epoch}};
  }
  if (r.params) j["params"] = nlohmann::ordered_json::parse(r.params->to_json());
  return j.dump();
}

expected<epoch_result> epoch_result_from_json(std::string_view line) {
  try {
    const auto j = nlohmann::ordered_json::parse(line);
    epoch_result r;
    r.epoch = j.at("epoch").get<std::int64_t>();
    // Every other number (or null: NaN) is one of the trainable's figures, in its order.
    for (const auto& item : j.items()) {
      const auto& key = item.key();
      if (key == "epoch" || key == "seconds" || key == "restored_from" || key == "params") continue;
      if (!item.value().is_number() && !item.value().is_null())
        return error(error_code::invalid_argument, "not a result line: " + key + " is not a number");
      r.values.emplace_back(key, number_of(item.value()));
    }
    r.seconds = number_of(j.value("seconds", nlohmann::ordered_json(0.0)));
    if (auto it = j.find("restored_from"); it != j.end()) {
      r.restored_why = it->at("why").get<std::string>();
      r.restored_trial = it->at("trial").get<std::int64_t>();
      r.restored_epoch = it->at("epoch").get<std::int64_t>();
    }
    if (auto it = j.find("params"); it != j.end()) {
      auto p = tune::params::from_json(it->dump());
      if (!p) return p.error();
      r.params = std::move(*p);
    }
    return r;
  } catch (const std::exception& e) {
    return error(error_code::invalid_argument, std::string("not a result line: ") + e.what());
  }
}

double objective::of(const epoch_result& r) const { return r.value(metric); }

bool objective::better(double a, double b) const {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return mode == tune::direction::maximize ? a > b : a < b;
}

std::optional<std::size_t> trial_summary::best_index(const objective& o) const {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < results.size(); ++i)
    if (!best || o.better(o.of(results[i]), o.of(results[*best]))) best = i;
  return best;
}

std::optional<double> trial_summary::best(const objective& o) const {
  auto i = best_index(o);
  return i ? std::optional(o.of(results[*i])) : std::nullopt;
}

std::optional<double> trial_summary::last(const objective& o) const {
  return results.empty() ? std::nullopt : std::optional(o.of(results.back()));
}

const trial_summary* best_trial(const std::vector<trial_summary>& trials, const objective& o) {
  const trial_summary* best = nullptr;
  for (const auto& t : trials) {
    auto b = t.best(o);
    if (b && (!best || o.better(*b, *best->best(o)))) best = &t;
  }
  return best;
}

tuning_overhead synthetic_overhead(const std::vector<trial_summary>& trials, double wall_seconds, double cpus) {
  tuning_overhead o{.wall_seconds = wall_seconds, .cpus = cpus, .trials = trials.size()};
  for (const auto& t : trials) {
    const auto cost_ms = t.params.number("cost_ms");  // every synthetic trial has it (fixed_params)
    o.iterations += t.results.size();
    o.compute_seconds += static_cast<double>(t.results.size()) * (cost_ms ? *cost_ms : 0.0) / 1000;
  }
  return o;
}

std::string to_string(const tuning_overhead& o) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%zu trials, %zu iterations in %.1f s on %g CPUs (%.1f s of compute): overhead %.0f ms per trial, "
                "%.1f ms per iteration",
                o.trials, o.iterations, o.wall_seconds, o.cpus, o.compute_seconds, o.per_trial_ms(), o.per_iteration_ms());
  return buf;
}

std::string trial_name(tune::trial_id id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "trial_%04lld", static_cast<long long>(id));
  return buf;
}

std::string format_duration(double seconds) {
  char buf[32];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  } else if (seconds < 3600) {
    const auto s = static_cast<long long>(seconds);
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    const auto s = static_cast<long long>(seconds);
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s / 60) % 60);
  }
  return buf;
}

std::string format_value(const tune::value& v) {
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", std::get<double>(v));
  return buf;
}

} // namespace celer::tune_app
