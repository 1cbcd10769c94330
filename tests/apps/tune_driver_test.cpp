// celer-tune's driver, its pieces on their own (no trials run, no runtime): the table of
// trials it keeps, and where its next trial comes from (the trials a resume continues, then
// the searcher's), with a scripted searcher.
#include <catch2/catch.hpp>

#include "trial_source.hpp"
#include "trial_table.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace celer::tune_app;
namespace tune = celer::tune;

/// Suggests {"lr": 1}, {"lr": 2}, ... up to `samples`, and records what it observes.
class scripted_searcher final : public tune::searcher {
public:
  explicit scripted_searcher(int samples, std::vector<std::pair<tune::params, double>>& seen)
    : samples_(samples), seen_(seen) {}
  std::optional<tune::params> suggest() override {
    ++asked;
    if (drawn_ == samples_) return std::nullopt;
    ++drawn_;
    return tune::params{{"lr", static_cast<double>(drawn_)}};
  }
  celer::expected<void> observe(const tune::params& p, double value) override {
    seen_.emplace_back(p, value);
    return {};
  }
  std::string_view name() const noexcept override { return "scripted"; }
  int asked = 0;

private:
  int samples_;
  int drawn_ = 0;
  std::vector<std::pair<tune::params, double>>& seen_;
};

trial_summary trial(tune::trial_id id) {
  trial_summary t;
  t.id = id;
  return t;
}

} // namespace

TEST_CASE("the trial table keeps trials in the order added, finds them by id, and gives new ids past them all",
          "[tune][driver]") {
  trial_table trials;
  CHECK(trials.empty());
  CHECK(trials.next_id() == 0);
  trials.add(trial(trials.next_id()));
  trials.add(trial(5));  // read back by a resume: ids need not follow
  trials.add(trial(2));
  CHECK(trials.next_id() == 6);
  trials.at(2).state = trial_state::running;
  REQUIRE(trials.size() == 3);
  CHECK(trials.all()[0].id == 0);
  CHECK(trials.all()[1].id == 5);
  CHECK(trials.all()[2].state == trial_state::running);
  CHECK_THROWS_AS(trials.at(3), std::out_of_range);
}

TEST_CASE("a trial source continues a resume's trials first, then gives the searcher's params over the fixed ones",
          "[tune][driver]") {
  std::vector<std::pair<tune::params, double>> seen;
  auto searcher = std::make_unique<scripted_searcher>(3, seen);
  auto& script = *searcher;
  trial_source source(std::move(searcher), tune::params{{"optimizer", std::string("adam")}, {"lr", 0.5}});
  // A resume read back two trials, one of them unfinished: both were drawn already.
  source.drawn_before();
  source.drawn_before();
  source.resume_later(1);
  CHECK(source.resumes_waiting() == 1);
  CHECK(source.next_resumed() == tune::trial_id{1});
  CHECK_FALSE(source.next_resumed());

  auto next = source.next_new();
  REQUIRE(next);
  CHECK(*next == tune::params{{"optimizer", std::string("adam")}, {"lr", 3.0}});  // the searched lr wins
  CHECK_FALSE(source.next_new());  // num_samples are out
  CHECK_FALSE(source.next_new());
  CHECK(script.asked == 4);  // not asked again once it had no more

  REQUIRE(source.observe(*next, std::nan("")));
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].first == *next);
  CHECK(std::isnan(seen[0].second));
}
