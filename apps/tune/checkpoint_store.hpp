#pragma once
// Where trials' saved states go: each trial's own checkpoint writer (celer::checkpoint),
// whose archive tier is the trial's folder of the experiment directory.
//
//   checkpoint_store store("celer_results/digits", /*keep=*/2);
//   store.save(3, /*epoch=*/5, state);       // returns; a writer actor persists it
//   if (auto back = store.load_latest(3)) trial.load_state(back->state, ...);
//   store.release(3);                        // the trial ended: its writer finishes and stops
//
// On disk, trial_0003/checkpoints/ is a checkpoint archive (actors/README.md, "On disk"):
// manifests/ and content-addressed chunks/, so an epoch's unchanged tensors are not written
// again; celer::checkpoint::restore({.archive_dir = ".../trial_0003/checkpoints"}) reads it.
// One owner (the driver's thread) calls it.
#include <celer/actors/checkpoint.hpp>
#include <celer/actors/tune.hpp>
#include <celer/error.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace celer::tune_app {

class checkpoint_store {
public:
  /// Checkpoints of trial N go to `root`/trial_NNNN/checkpoints; each trial keeps its
  /// newest `keep`. Finds the checkpoints already there (a resumed experiment's).
  checkpoint_store(std::filesystem::path root, std::size_t keep);
  /// Waits for every save in flight, then stops the writers.
  ~checkpoint_store();
  checkpoint_store(const checkpoint_store&) = delete;
  checkpoint_store& operator=(const checkpoint_store&) = delete;

  /// Hands `state` to the trial's writer as its checkpoint of `epoch` (started on the first
  /// save) and returns once it is copied: the writer persists it in the background. An
  /// error here is the writer's start or the copy; a failed persist shows in the next
  /// load or release.
  [[nodiscard]] expected<void> save(tune::trial_id trial, std::int64_t epoch, checkpoint::snapshot state);
  /// The trial's checkpoint of `epoch` (the newest, if it saved that epoch twice, as a trial
  /// does when PBT copies another's state). Waits for the trial's saves in flight first.
  /// not_found when there is none; data_loss, saying why, when it does not read back whole.
  [[nodiscard]] expected<checkpoint::snapshot> load(tune::trial_id trial, std::int64_t epoch);

  /// What load_latest read.
  struct loaded {
    std::int64_t epoch = 0;
    checkpoint::snapshot state;
    /// Newer checkpoints passed over as unreadable, with why (restore's fallback).
    std::vector<std::string> skipped;
  };
  /// The trial's newest checkpoint that reads back whole (waiting for saves in flight).
  /// not_found when it has none; data_loss when none reads back.
  [[nodiscard]] expected<loaded> load_latest(tune::trial_id trial);
  /// The epoch of the trial's newest checkpoint on disk, if it has one.
  [[nodiscard]] std::optional<std::int64_t> latest(tune::trial_id trial) const;
  /// The trial is over: waits for its saves and stops its writer. The first failure of its
  /// saves since the last wait, if any.
  [[nodiscard]] expected<void> release(tune::trial_id trial);
  /// The trial's checkpoint archive.
  [[nodiscard]] std::filesystem::path where(tune::trial_id trial) const;

private:
  [[nodiscard]] checkpoint::options options_for(tune::trial_id trial) const;
  /// Waits for the trial's saves in flight, if it has a writer.
  [[nodiscard]] expected<void> flush(tune::trial_id trial);

  std::filesystem::path root_;
  std::size_t keep_;
  std::map<tune::trial_id, checkpoint::checkpointer> writers_;
};

} // namespace celer::tune_app
