#pragma once
// Where trials' saved states go: the one interface the driver saves and restores through,
// so that the files written here today can become the checkpoint writer actors
// (actors/checkpoint/) without touching the driver.
//
//   auto store = celer::tune_app::make_file_checkpoint_store("celer_results/digits", /*keep=*/2);
//   store->save(3, /*epoch=*/5, state, /*keep_for_pbt=*/false);   // trial_0003/checkpoint_0005.pt
//   if (auto e = store->latest(3)) auto state = store->load(3, *e);
//
// One owner (the driver's thread) calls it.
#include <celer/actors/tune.hpp>
#include <celer/codec.hpp>
#include <celer/error.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace celer::tune_app {

class checkpoint_store {
public:
  virtual ~checkpoint_store() = default;
  /// Keeps `state` as trial's checkpoint of `epoch`, then forgets the trial's older ones
  /// beyond the newest `keep` and the one PBT keeps. `keep_for_pbt` makes this the one PBT
  /// keeps (others may copy it until the trial's next perturbation), replacing the last.
  [[nodiscard]] virtual expected<void> save(tune::trial_id trial, std::int64_t epoch, const bytes& state,
                                            bool keep_for_pbt) = 0;
  /// The trial took another's state at `epoch` (PBT's exploit): that becomes its only
  /// checkpoint, as its own earlier ones belong to a line of training it left.
  [[nodiscard]] virtual expected<void> adopt(tune::trial_id trial, std::int64_t epoch, const bytes& state) = 0;
  /// not_found when the store holds no such checkpoint.
  [[nodiscard]] virtual expected<bytes> load(tune::trial_id trial, std::int64_t epoch) const = 0;
  /// The trial's newest checkpoint (by epoch), if it has one.
  [[nodiscard]] virtual std::optional<std::int64_t> latest(tune::trial_id trial) const = 0;
  /// The epochs the trial has checkpoints of, oldest first.
  [[nodiscard]] virtual std::vector<std::int64_t> epochs(tune::trial_id trial) const = 0;
  /// Where a checkpoint can be found, for people (a path, or a description).
  [[nodiscard]] virtual std::string where(tune::trial_id trial, std::int64_t epoch) const = 0;
};

/// Files in the experiment directory: <root>/trial_NNNN/checkpoint_EEEE.pt, each written to a
/// temporary name and renamed, so that a reader (or a resumed run) never sees half of one.
/// Finds the checkpoints already there (a resumed experiment's).
[[nodiscard]] std::unique_ptr<checkpoint_store> make_file_checkpoint_store(std::string root, int keep);

} // namespace celer::tune_app
