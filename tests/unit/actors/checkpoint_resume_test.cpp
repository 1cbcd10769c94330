// Exact resume: a trainer killed with SIGKILL and resumed from its checkpoint gives the
// same loss sequence, bit for bit, as a run that was never interrupted (on CPU, without
// LibTorch: the trainer is checkpoint_resume_child.cpp).
#include "checkpoint_fixtures.hpp"
#include "resume_child.hpp"

#include <catch2/catch.hpp>

using resume_test::child;
using resume_test::read_all;

TEST_CASE("a run killed with SIGKILL and resumed gives the same losses, bit for bit",
          "[actors][checkpoint][resume]") {
  checkpoint_test::temp_dir reference_dir, killed_dir;
  const std::string steps = "300", every = "50";

  child reference(CELER_CHECKPOINT_CHILD, {reference_dir.path.string(), steps, every});
  const auto expected = read_all(reference);
  REQUIRE(reference.exit_code() == 0);
  REQUIRE(expected.done);
  REQUIRE(expected.loss.size() == 300);
  CHECK(expected.loss.at(300) != expected.loss.at(1));  // it learns something

  {
    // Killed just after save(150) returned: its writers are persisting it (or have), and
    // checkpoint 100 is durable (the trainer waited for it).
    child victim(CELER_CHECKPOINT_CHILD, {killed_dir.path.string(), steps, every, "--pause-after", "150"});
    bool persisted = false;
    bool paused = false;
    while (!paused) {
      const std::string l = victim.line();
      if (l.empty()) break;  // it ended: a failure the REQUIREs below report
      if (l == "persisted 100") persisted = true;
      if (l == "paused 150") paused = true;
    }
    REQUIRE(persisted);
    REQUIRE(paused);
    victim.kill_now();
  }

  child resumed(CELER_CHECKPOINT_CHILD, {killed_dir.path.string(), steps, every, "--resume"});
  const auto after = read_all(resumed);
  REQUIRE(resumed.exit_code() == 0);
  REQUIRE(after.done);
  // 150 if its writers finished before the kill, else 100: never anything half-written.
  CHECK((after.restored == 100 || after.restored == 150));
  REQUIRE(after.loss.size() == static_cast<std::size_t>(300 - after.restored));
  for (const auto& [step, loss] : after.loss) {
    INFO("step " << step);
    CHECK(loss == expected.loss.at(step));
  }
}
