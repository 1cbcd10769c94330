// The experiment directory's files (experiment_dir.hpp).
#include "experiment_dir.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace celer::tune_app {
namespace {

namespace fs = std::filesystem;

error io_error(const fs::path& path, std::string_view what) {
  return error(error_code::unavailable, "cannot " + std::string(what) + " " + path.string() + ": " +
                                          std::strerror(errno));
}

expected<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(error_code::not_found, "cannot read " + path.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string csv_field(std::string s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_number(std::optional<double> d) {
  if (!d || std::isnan(*d)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", *d);
  return buf;
}

} // namespace

expected<void> write_file_atomically(const fs::path& path, std::string_view content) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(tmp, "create");
  std::size_t done = 0;
  while (done < content.size()) {
    const auto n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const auto e = io_error(tmp, "write");
      ::close(fd);
      return e;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) return io_error(tmp, "write");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return io_error(path, "rename a temporary file to");
  return {};
}

bool experiment_dir::holds_experiment() const { return fs::exists(root_ / "experiment.json"); }

expected<std::string> experiment_dir::read_config() const { return read_text(root_ / "experiment.json"); }

expected<void> experiment_dir::create(std::string_view config_json) const {
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) return error(error_code::unavailable, "cannot create " + root_.string() + ": " + ec.message());
  return write_file_atomically(root_ / "experiment.json", config_json);
}

expected<void> experiment_dir::write_params(tune::trial_id id, const tune::params& p) const {
  std::error_code ec;
  fs::create_directories(trial_dir(id), ec);
  if (ec) return error(error_code::unavailable, "cannot create " + trial_dir(id).string() + ": " + ec.message());
  return write_file_atomically(trial_dir(id) / "params.json",
                               nlohmann::json::parse(p.to_json()).dump(2) + "\n");
}

expected<void> experiment_dir::write_status(const trial_summary& t) const {
  nlohmann::ordered_json j;
  j["trial"] = t.id;
  j["state"] = std::string(to_string(t.state));
  j["epochs"] = t.results.size();
  j["failures"] = t.failures;
  j["reason"] = t.reason;
  j["params"] = nlohmann::ordered_json::parse(t.params.to_json());
  return write_file_atomically(trial_dir(t.id) / "status.json", j.dump(2) + "\n");
}

expected<void> experiment_dir::append_result(tune::trial_id id, const epoch_result& r) const {
  const auto path = trial_dir(id) / "result.jsonl";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(path, "open");
  // One write of the whole line: a run killed meanwhile leaves whole lines, or a torn last
  // one that read_trials drops.
  const std::string line = to_json_line(r) + "\n";
  const auto n = ::write(fd, line.data(), line.size());
  const auto e = n == static_cast<ssize_t>(line.size()) ? expected<void>() : expected<void>(io_error(path, "append to"));
  ::close(fd);
  return e;
}

expected<void> experiment_dir::truncate_results(tune::trial_id id, std::size_t lines) const {
  const auto path = trial_dir(id) / "result.jsonl";
  auto text = read_text(path);
  if (!text) return {};
  std::string kept;
  std::istringstream in(*text);
  std::string line;
  for (std::size_t i = 0; i < lines && std::getline(in, line); ++i) kept += line + "\n";
  return write_file_atomically(path, kept);
}

expected<std::vector<trial_summary>> experiment_dir::read_trials() const {
  std::vector<trial_summary> out;
  std::error_code ec;
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(root_, ec))
    if (entry.is_directory() && entry.path().filename().string().starts_with("trial_"))
      names.insert(entry.path().filename().string());
  for (const auto& name : names) {
    trial_summary t;
    long long id = 0;
    char tail = 0;
    if (std::sscanf(name.c_str(), "trial_%lld%c", &id, &tail) != 1) continue;  // not one of ours
    t.id = id;
    auto params_text = read_text(root_ / name / "params.json");
    if (!params_text) continue;  // a trial killed before it was written never ran
    auto p = tune::params::from_json(*params_text);
    if (!p) return error(error_code::data_loss, (root_ / name / "params.json").string() + ": " + p.error().message());
    t.params = *p;
    if (auto status = read_text(root_ / name / "status.json")) {
      try {
        const auto j = nlohmann::json::parse(*status);
        t.state = trial_state_from(j.at("state").get<std::string>()).value_or(trial_state::pending);
        t.reason = j.value("reason", "");
        t.failures = j.value("failures", 0);
        if (auto now = tune::params::from_json(j.at("params").dump())) t.params = *now;
      } catch (const std::exception& e) {
        return error(error_code::data_loss, (root_ / name / "status.json").string() + ": " + e.what());
      }
    }
    if (auto results = read_text(root_ / name / "result.jsonl")) {
      std::istringstream in(*results);
      std::string line;
      while (std::getline(in, line)) {
        auto r = epoch_result_from_json(line);
        if (!r) break;  // the torn end of a killed run
        t.results.push_back(std::move(*r));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

expected<void> experiment_dir::write_results_csv(const std::vector<trial_summary>& trials,
                                                 const objective& o) const {
  std::set<std::string> param_names;
  for (const auto& t : trials)
    for (const auto& [name, v] : t.params) param_names.insert(name);
  std::string csv = "trial,state";
  for (const auto& name : param_names) csv += "," + csv_field(name);
  csv += ",epochs,best_" + o.metric + ",best_epoch,last_" + o.metric + ",failures,reason\n";
  for (const auto& t : trials) {
    csv += std::to_string(t.id) + "," + std::string(to_string(t.state));
    for (const auto& name : param_names) {
      const auto* v = t.params.find(name);
      csv += "," + (v ? csv_field(std::holds_alternative<std::string>(*v) ? std::get<std::string>(*v) : tune::to_string(*v)) : "");
    }
    const auto best = t.best_index(o);
    csv += "," + std::to_string(t.results.size()) + "," + csv_number(t.best(o)) + "," +
           (best ? std::to_string(t.results[*best].epoch) : "") + "," + csv_number(t.last(o)) + "," +
           std::to_string(t.failures) + "," + csv_field(t.reason) + "\n";
  }
  return write_file_atomically(root_ / "results.csv", csv);
}

expected<void> experiment_dir::write_best_config(const trial_summary& best, const objective& o,
                                                 const std::string& checkpoint) const {
  nlohmann::ordered_json j;
  const auto i = best.best_index(o);
  j["trial"] = best.id;
  j["metric"] = o.metric;
  j["mode"] = std::string(tune::to_string(o.mode));
  j["value"] = i ? o.of(best.results[*i]) : 0.0;
  j["epoch"] = i ? best.results[*i].epoch : 0;
  j["state"] = std::string(to_string(best.state));
  j["params"] = nlohmann::ordered_json::parse(best.params.to_json());
  j["checkpoint"] = checkpoint;
  return write_file_atomically(root_ / "best_config.json", j.dump(2) + "\n");
}

} // namespace celer::tune_app
