// Trials' checkpoints through the checkpoint writers (checkpoint_store.hpp).
#include "checkpoint_store.hpp"

#include "experiment.hpp"

#include <utility>

namespace celer::tune_app {

checkpoint_store::checkpoint_store(std::filesystem::path root, std::size_t keep)
  : root_(std::move(root)), keep_(keep) {}

checkpoint_store::~checkpoint_store() {
  for (auto& [id, writer] : writers_) (void)writer.wait();
}

std::filesystem::path checkpoint_store::where(tune::trial_id trial) const {
  return root_ / trial_name(trial) / "checkpoints";
}

checkpoint::options checkpoint_store::options_for(tune::trial_id trial) const {
  return {.archive_dir = where(trial).string(), .archive_keep_last = keep_};
}

expected<void> checkpoint_store::save(tune::trial_id trial, std::int64_t epoch, checkpoint::snapshot state) {
  auto found = writers_.find(trial);
  if (found == writers_.end()) {
    auto opened = checkpoint::checkpointer::open(options_for(trial));
    if (!opened) {
      return error(opened.error().code(),
                   "cannot start " + trial_name(trial) + "'s checkpoint writer: " + opened.error().message());
    }
    found = writers_.emplace(trial, std::move(*opened)).first;
  }
  state.set_step(epoch);
  state.set_metadata("trial", trial_name(trial));
  auto id = found->second.save(state);
  if (!id) return error(id.error().code(), trial_name(trial) + "'s checkpoint of epoch " + std::to_string(epoch) +
                                             ": " + id.error().message());
  return {};
}

expected<void> checkpoint_store::flush(tune::trial_id trial) {
  auto found = writers_.find(trial);
  if (found == writers_.end()) return {};
  if (auto ok = found->second.wait(); !ok)
    return error(ok.error().code(), trial_name(trial) + "'s checkpoint writer: " + ok.error().message());
  return {};
}

expected<checkpoint::snapshot> checkpoint_store::load(tune::trial_id trial, std::int64_t epoch) {
  const auto flushed = flush(trial);  // a failed save: the checkpoint below may still be there
  const auto opts = options_for(trial);
  auto all = checkpoint::list(opts);
  if (!all) return all.error();
  const checkpoint::checkpoint_info* wanted = nullptr;
  for (const auto& c : *all)
    if (c.step == epoch) wanted = &c;  // oldest first: the last is the newest
  if (wanted == nullptr) {
    std::string why = trial_name(trial) + " has no checkpoint of epoch " + std::to_string(epoch);
    if (!flushed) why += " (" + flushed.error().message() + ")";
    return error(error_code::not_found, why);
  }
  auto back = checkpoint::restore(opts, {.max_id = wanted->id});
  if (!back) return back.error();
  if (back->info.id != wanted->id) {
    std::string why;
    for (const auto& s : back->skipped)
      if (s.id == wanted->id) why = s.why;
    return error(error_code::data_loss, trial_name(trial) + "'s checkpoint of epoch " + std::to_string(epoch) +
                                          " does not read back: " + why);
  }
  return std::move(back->data);
}

expected<checkpoint_store::loaded> checkpoint_store::load_latest(tune::trial_id trial) {
  (void)flush(trial);  // what did persist is read below; a failed save is skipped by restore
  auto back = checkpoint::restore(options_for(trial));
  if (!back) return back.error();
  loaded out{.epoch = back->info.step, .state = std::move(back->data), .skipped = {}};
  for (const auto& s : back->skipped)
    out.skipped.push_back("checkpoint " + std::to_string(s.id) + " (epoch " + std::to_string(s.step) + "): " + s.why);
  return out;
}

std::optional<std::int64_t> checkpoint_store::latest(tune::trial_id trial) const {
  std::error_code ec;
  if (!std::filesystem::exists(where(trial), ec)) return std::nullopt;
  auto all = checkpoint::list(options_for(trial));
  if (!all || all->empty()) return std::nullopt;
  return all->back().step;
}

expected<void> checkpoint_store::release(tune::trial_id trial) {
  auto ok = flush(trial);
  writers_.erase(trial);
  return ok;
}

} // namespace celer::tune_app
