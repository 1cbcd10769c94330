// The asynchronous writers: a checkpointer in an embedded runtime (celer::init() with no
// address), its writer actors persisting in the background.
#include <celer/actors/checkpoint.hpp>
#include <celer/celer.hpp>
#include <celer/store/checksum.hpp>

#include <catch2/catch.hpp>

#include <cstring>

#include "checkpoint_fixtures.hpp"

using namespace celer::checkpoint;
using namespace checkpoint_test;

namespace {

struct embedded_runtime {
  embedded_runtime() { celer::init({.num_cpus = 2}); }
  ~embedded_runtime() { celer::shutdown(); }
  embedded_runtime(const embedded_runtime&) = delete;
  embedded_runtime& operator=(const embedded_runtime&) = delete;
};

snapshot of(const std::vector<float>& w, std::int64_t step) {
  snapshot s;
  s.set_step(step);
  s.add_view("model/w", w.data(), w.size() * sizeof(float), {{"dtype", "float32"}});
  s.add_int("step", step);
  return s;
}

} // namespace

TEST_CASE("a checkpointer persists saves in the background and restore reads them back",
          "[actors][checkpoint][runtime]") {
  embedded_runtime rt;
  temp_dir dir;
  auto ck = checkpointer::open(dir.both());
  REQUIRE(ck.has_value());
  auto w = noise_floats(1 << 20, 1);  // 4 MiB
  std::vector<std::uint64_t> ids;
  for (std::int64_t step = 100; step <= 300; step += 100) {
    auto id = ck->save(of(w, step));
    REQUIRE(id.has_value());
    ids.push_back(*id);
    // The snapshot was copied: changing the weights now does not change what is saved.
    for (std::size_t i = 0; i < w.size() / 100; ++i) w[i] += 1.0f;
  }
  CHECK(ids == std::vector<std::uint64_t>{1, 2, 3});
  REQUIRE(ck->wait().has_value());
  CHECK(ck->pending() == 0);
  const auto reports = ck->take_reports();
  REQUIRE(reports.size() == 3);
  for (const auto& r : reports) {
    CHECK(r.logical_bytes == (4u << 20) + 3);
    CHECK(r.fast.used);
    CHECK(r.archive.used);
    CHECK(r.fast.node == celer::current_node_id());  // the writers run on the saver's node
    CHECK(r.fast.durable_after > std::chrono::nanoseconds(0));
    CHECK(r.fast.busy > std::chrono::nanoseconds(0));
  }
  CHECK(reports[0].fast.bytes_written > (4u << 20));
  // Saves 2 and 3 changed the first 1% of the values: a chunk or two.
  CHECK(reports[1].fast.chunks_written <= 2);
  CHECK(reports[2].archive.bytes_written < (1u << 20) + reports[2].archive.manifest_bytes);
  CHECK(ck->take_reports().empty());

  // Restore opens the tiers read-only, beside the running writers.
  auto back = restore(dir.both());
  REQUIRE(back.has_value());
  CHECK(back->info.id == 3);
  CHECK(back->data.get_int("step").value() == 300);
  std::vector<float> expected = noise_floats(1 << 20, 1);
  for (int save = 0; save < 2; ++save) {
    for (std::size_t i = 0; i < expected.size() / 100; ++i) expected[i] += 1.0f;
  }
  const auto* e = back->data.find("model/w");
  REQUIRE(e != nullptr);
  REQUIRE(e->data.size() == expected.size() * sizeof(float));
  CHECK(std::memcmp(e->data.data(), expected.data(), e->data.size()) == 0);
}

TEST_CASE("a full queue of pending saves makes save wait for the oldest",
          "[actors][checkpoint][runtime]") {
  embedded_runtime rt;
  temp_dir dir;
  options o = dir.archive_only();
  o.max_pending = GENERATE(std::size_t{1}, std::size_t{2});
  auto ck = checkpointer::open(o);
  REQUIRE(ck.has_value());
  const auto w = noise_floats(1 << 18, 2);
  std::vector<std::uint64_t> finished;
  for (std::int64_t step = 1; step <= 5; ++step) {
    REQUIRE(ck->save(of(w, step)).has_value());
    CHECK(ck->pending() <= o.max_pending);
    for (const auto& r : ck->take_reports()) finished.push_back(r.id);
    // When save returns, every save older than the newest max_pending is durable.
    const auto must_be_done = step - static_cast<std::int64_t>(o.max_pending);
    for (std::int64_t id = 1; id <= must_be_done; ++id) {
      CHECK(std::find(finished.begin(), finished.end(), static_cast<std::uint64_t>(id)) !=
            finished.end());
    }
  }
  REQUIRE(ck->wait().has_value());
  for (const auto& r : ck->take_reports()) finished.push_back(r.id);
  CHECK(finished == std::vector<std::uint64_t>{1, 2, 3, 4, 5});
}

TEST_CASE("wait reports a full disk as resource_exhausted with the path, and saving goes on",
          "[actors][checkpoint][runtime]") {
  embedded_runtime rt;
  temp_dir dir;
  auto ck = checkpointer::open(dir.archive_only());
  REQUIRE(ck.has_value());
  const auto w = noise_floats(1 << 16, 3);  // 256 KiB: one or two chunks
  // The writer writes each chunk to "<key>.tmp" first: make that name the full device.
  const auto first = cut(w.data(), w.size() * sizeof(float)).front();
  const auto key = celer::store::content_hash(w.data(), first).hex();
  const fs::path tmp = chunk_file(dir.path / "archive", key).string() + ".tmp";
  fs::create_directories(tmp.parent_path());
  fs::create_symlink("/dev/full", tmp);

  REQUIRE(ck->save(of(w, 1)).has_value());
  auto failed = ck->wait();
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().code() == celer::error_code::resource_exhausted);
  CHECK_THAT(failed.error().message(), Catch::Contains(tmp.string()) &&
                                         Catch::Contains("checkpoint 1 (step 1), archive tier"));
  CHECK(ck->take_reports().empty());

  // The disk has room again (the writer removed its temporary): the next save goes through.
  REQUIRE(ck->save(of(w, 2)).has_value());
  REQUIRE(ck->wait().has_value());
  auto back = restore(dir.archive_only());
  REQUIRE(back.has_value());
  CHECK(back->info.step == 2);
  CHECK(back->skipped.empty());  // checkpoint 1 never got a manifest
}

TEST_CASE("a checkpointer that cannot open its tiers says so, with the path",
          "[actors][checkpoint][runtime]") {
  embedded_runtime rt;
  temp_dir dir;
  SECTION("an archive under a file") {
    write_file(dir.path / "a-file", "");
    auto ck = checkpointer::open({.archive_dir = (dir.path / "a-file" / "run").string()});
    REQUIRE_FALSE(ck.has_value());
    CHECK_THAT(ck.error().message(), Catch::Contains((dir.path / "a-file").string()));
  }
  SECTION("directories another checkpointer writes") {
    auto first = checkpointer::open(dir.both());
    REQUIRE(first.has_value());
    auto second = checkpointer::open(dir.both());
    REQUIRE_FALSE(second.has_value());
    CHECK(second.error().code() == celer::error_code::unavailable);
    auto archive_only = checkpointer::open(dir.archive_only());
    REQUIRE_FALSE(archive_only.has_value());
    CHECK_THAT(archive_only.error().message(), Catch::Contains("LOCK"));
  }
  SECTION("without the runtime") {
    celer::shutdown();
    auto ck = checkpointer::open(dir.both());
    REQUIRE_FALSE(ck.has_value());
    CHECK(ck.error().code() == celer::error_code::failed_precondition);
    celer::init({.num_cpus = 2});  // for the fixture's shutdown
  }
}

TEST_CASE("a new checkpointer continues the ids of the directories it opens",
          "[actors][checkpoint][runtime]") {
  embedded_runtime rt;
  temp_dir dir;
  const auto w = noise_floats(1 << 12, 4);
  {
    auto ck = checkpointer::open(dir.both());
    REQUIRE(ck.has_value());
    REQUIRE(ck->save(of(w, 1)).has_value());
    REQUIRE(ck->save(of(w, 2)).has_value());
    // No wait: the destructor waits for both, then stops the writers.
  }
  auto ck = checkpointer::open(dir.both());
  INFO((ck ? "" : ck.error().to_string()));
  REQUIRE(ck.has_value());
  auto id = ck->save(of(w, 3));
  REQUIRE(id.has_value());
  CHECK(*id == 3);
  REQUIRE(ck->wait().has_value());
  auto all = list(dir.both());
  REQUIRE(all.has_value());
  CHECK(all->size() == 3);
}
