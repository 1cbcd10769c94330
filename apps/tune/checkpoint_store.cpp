// Checkpoints as files in the experiment directory (checkpoint_store.hpp).
#include "checkpoint_store.hpp"

#include "experiment.hpp"
#include "experiment_dir.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace celer::tune_app {
namespace {

namespace fs = std::filesystem;

class file_checkpoint_store final : public checkpoint_store {
public:
  file_checkpoint_store(std::string root, int keep) : root_(std::move(root)), keep_(keep) {}

  expected<void> save(tune::trial_id trial, std::int64_t epoch, const bytes& state, bool keep_for_pbt) override {
    if (auto ok = write_file_atomically(path(trial, epoch), state.view()); !ok) return ok;
    auto& held = known(trial);
    held.insert(epoch);
    if (keep_for_pbt) pinned_[trial] = epoch;
    // The newest keep_, and the one PBT keeps; the rest go.
    std::vector<std::int64_t> sorted(held.begin(), held.end());
    const auto pin = pinned_.find(trial);
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep_) < sorted.size(); ++i) {
      if (pin != pinned_.end() && pin->second == sorted[i]) continue;
      forget(trial, sorted[i]);
    }
    return {};
  }

  expected<void> adopt(tune::trial_id trial, std::int64_t epoch, const bytes& state) override {
    pinned_.erase(trial);
    for (auto e : std::vector<std::int64_t>(known(trial).begin(), known(trial).end()))
      if (e != epoch) forget(trial, e);
    return save(trial, epoch, state, false);
  }

  expected<bytes> load(tune::trial_id trial, std::int64_t epoch) const override {
    std::ifstream in(path(trial, epoch), std::ios::binary);
    if (!in) return error(error_code::not_found, "no checkpoint " + path(trial, epoch));
    std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return bytes(std::move(data));
  }

  std::optional<std::int64_t> latest(tune::trial_id trial) const override {
    const auto& held = known(trial);
    if (held.empty()) return std::nullopt;
    return *held.rbegin();
  }

  std::vector<std::int64_t> epochs(tune::trial_id trial) const override {
    const auto& held = known(trial);
    return {held.begin(), held.end()};
  }

  std::string where(tune::trial_id trial, std::int64_t epoch) const override { return path(trial, epoch); }

private:
  std::string path(tune::trial_id trial, std::int64_t epoch) const {
    char name[40];
    std::snprintf(name, sizeof name, "checkpoint_%04lld.pt", static_cast<long long>(epoch));
    return (fs::path(root_) / trial_name(trial) / name).string();
  }

  /// The epochs the trial has on disk; read from its directory the first time.
  std::set<std::int64_t>& known(tune::trial_id trial) const {
    auto [it, fresh] = held_.try_emplace(trial);
    if (!fresh) return it->second;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fs::path(root_) / trial_name(trial), ec)) {
      const auto name = entry.path().filename().string();
      long long epoch = 0;
      char tail[8] = {};
      // checkpoint_0005.pt; a .tmp left by a killed writer is not one.
      if (std::sscanf(name.c_str(), "checkpoint_%lld.%7s", &epoch, tail) == 2 && std::string(tail) == "pt")
        it->second.insert(epoch);
    }
    return it->second;
  }

  void forget(tune::trial_id trial, std::int64_t epoch) {
    std::error_code ec;
    fs::remove(path(trial, epoch), ec);
    known(trial).erase(epoch);
  }

  std::string root_;
  int keep_;
  mutable std::map<tune::trial_id, std::set<std::int64_t>> held_;
  std::map<tune::trial_id, std::int64_t> pinned_;
};

} // namespace

std::unique_ptr<checkpoint_store> make_file_checkpoint_store(std::string root, int keep) {
  return std::make_unique<file_checkpoint_store>(std::move(root), keep);
}

} // namespace celer::tune_app
