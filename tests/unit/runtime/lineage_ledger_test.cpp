// The lineage a core's reference table keeps (core/lineage_ledger.hpp): admitted within
// lineage_max_depth and lineage_max_bytes, dropped, and lost outputs queued for the
// rebuilder and handed over once.
#include "config/knobs.hpp"
#include "core/lineage_ledger.hpp"

#include <catch2/catch.hpp>

using namespace celer;

namespace {

/// Sets the lineage bounds for one test.
struct scoped_lineage_bounds {
  scoped_lineage_bounds(int max_depth, double max_bytes) : saved(knobs()) {
    auto k = saved;
    k.lineage_max_depth = max_depth;
    k.lineage_max_bytes = max_bytes;
    set_knobs(k);
  }
  ~scoped_lineage_bounds() { set_knobs(saved); }
  knob_values saved;
};

lineage_rebuild lost(const std::string& function) {
  lineage_rebuild r;
  r.spec.id = task_id::random();
  r.spec.function = function;
  r.retries_left = 2;
  r.why = "its node died";
  return r;
}

} // namespace

TEST_CASE("lineages within the bounds are kept and counted until dropped", "[core][lineage_ledger]") {
  const scoped_lineage_bounds bounds(/*max_depth=*/3, /*max_bytes=*/1000);
  lineage_ledger lineage;
  CHECK(lineage.admit(/*depth=*/1, /*bytes=*/400).empty());
  CHECK(lineage.admit(/*depth=*/3, /*bytes=*/600).empty());  // exactly at both bounds
  CHECK(lineage.count() == 2);
  CHECK(lineage.bytes() == 1000);
  lineage.drop(400);
  CHECK(lineage.count() == 1);
  CHECK(lineage.bytes() == 600);
}

TEST_CASE("a lineage too deep is not kept, and says so", "[core][lineage_ledger]") {
  const scoped_lineage_bounds bounds(/*max_depth=*/2, /*max_bytes=*/1000);
  lineage_ledger lineage;
  const auto why = lineage.admit(/*depth=*/3, /*bytes=*/10);
  CHECK(why == "its lineage is 3 tasks deep, past lineage_max_depth (2)");
  CHECK(lineage.count() == 0);
  CHECK(lineage.bytes() == 0);
}

TEST_CASE("a lineage past lineage_max_bytes is not kept until others are dropped",
          "[core][lineage_ledger]") {
  const scoped_lineage_bounds bounds(/*max_depth=*/5, /*max_bytes=*/100);
  lineage_ledger lineage;
  REQUIRE(lineage.admit(/*depth=*/1, /*bytes=*/80).empty());
  const auto why = lineage.admit(/*depth=*/1, /*bytes=*/30);
  CHECK_THAT(why, Catch::Matchers::Contains("lineage_max_bytes (100 bytes)"));
  CHECK(lineage.count() == 1);
  CHECK(lineage.bytes() == 80);
  lineage.drop(80);
  CHECK(lineage.admit(/*depth=*/1, /*bytes=*/30).empty());
}

TEST_CASE("lost outputs queued for rebuilding go to the rebuilder once, in order",
          "[core][lineage_ledger]") {
  const scoped_lineage_bounds bounds(/*max_depth=*/5, /*max_bytes=*/1000);
  lineage_ledger lineage;
  std::vector<lineage_rebuild> handed;
  lineage.set_rebuilder([&](std::vector<lineage_rebuild> work) {
    for (auto& r : work) handed.push_back(std::move(r));
  });
  REQUIRE(lineage.admit(1, 100).empty());
  REQUIRE(lineage.admit(1, 50).empty());
  lineage.queue_rebuild(lost("a"), 100);
  lineage.queue_rebuild(lost("b"), 50);
  CHECK(lineage.count() == 0);  // off the books: each run keeps a lineage again
  CHECK(lineage.bytes() == 0);
  CHECK(lineage.rebuilt() == 2);
  CHECK(handed.empty());  // nothing runs until taken (outside the table's lock)

  auto batch = lineage.take();
  REQUIRE(batch.to);
  batch.to(std::move(batch.work));
  REQUIRE(handed.size() == 2);
  CHECK(handed[0].spec.function == "a");
  CHECK(handed[1].spec.function == "b");
  CHECK(handed[0].retries_left == 2);
  CHECK(handed[0].why == "its node died");

  CHECK(lineage.take().work.empty());
  CHECK(lineage.rebuilt() == 2);
}

TEST_CASE("rebuilds taken before a rebuilder is installed come with none", "[core][lineage_ledger]") {
  const scoped_lineage_bounds bounds(/*max_depth=*/5, /*max_bytes=*/1000);
  lineage_ledger lineage;
  REQUIRE(lineage.admit(1, 10).empty());
  lineage.queue_rebuild(lost("a"), 10);
  auto batch = lineage.take();
  CHECK(batch.work.size() == 1);
  CHECK_FALSE(batch.to);
}
