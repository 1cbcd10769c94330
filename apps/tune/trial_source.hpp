#pragma once
// Where celer-tune's next trial comes from (the driver's): first the trials a --resume
// continues from their checkpoints, in the order read back, then new ones with the searcher's
// suggestions over the fixed params, until the searcher has no more. The searcher is also told
// how each trial ended. No runtime calls, no LibTorch.
//
//   trial_source source(std::move(*make_searcher(cfg)), fixed_params(cfg));
//   source.resume_later(id);                 // --resume: a trial that had not finished
//   if (auto id = source.next_resumed()) ... // continue it from disk
//   else if (auto p = source.next_new()) ... // a new trial with params *p
//   source.observe(t.params, value);         // NaN: it failed
#include <celer/actors/tune.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>

namespace celer::tune_app {

class trial_source {
public:
  trial_source(std::unique_ptr<tune::searcher> searcher, tune::params fixed)
    : searcher_(std::move(searcher)), fixed_(std::move(fixed)) {}

  /// --resume: a trial read back from disk that was drawn by the run before; the searcher
  /// counts it among its num_samples, as it drew it.
  void drawn_before() { (void)searcher_->suggest(); }
  /// --resume: trial `id` had not finished; it is continued before any new trial starts.
  void resume_later(tune::trial_id id) { resumes_.push_back(id); }
  /// Trials still to continue from disk.
  [[nodiscard]] std::size_t resumes_waiting() const noexcept { return resumes_.size(); }

  /// The next trial to continue from disk, if any is left.
  [[nodiscard]] std::optional<tune::trial_id> next_resumed();
  /// A new trial's params (the fixed ones, and the searcher's suggestion over them); nothing
  /// once the searcher has no more, and from then on without asking it again.
  [[nodiscard]] std::optional<tune::params> next_new();
  /// A trial with `params` ended with `value` (NaN: it failed).
  [[nodiscard]] expected<void> observe(const tune::params& params, double value) {
    return searcher_->observe(params, value);
  }

private:
  std::unique_ptr<tune::searcher> searcher_;
  /// What every trial gets besides the searched params.
  tune::params fixed_;
  std::deque<tune::trial_id> resumes_;
  bool searcher_done_ = false;
};

} // namespace celer::tune_app
