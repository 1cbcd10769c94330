// Checkpoint writers on a real local cluster: a trainer actor pinned to node1 saves through
// its own checkpointer; the writers must run on node1 (the fast tier is that node's disk,
// and the snapshot's pieces are objects in that node's store), and what they wrote must
// restore, from the trainer and from the driver on another node.
#include <catch2/catch.hpp>

#include "local_cluster.hpp"

#include <celer/actors/checkpoint.hpp>
#include <celer/celer.hpp>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace celer_it;
namespace ckpt = celer::checkpoint;

namespace {

std::vector<float> weights(int step) {
  std::vector<float> w(std::size_t{1} << 19);  // 2 MiB: pieces go through the node's store
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 977) * 0.5f + step;
  return w;
}

struct ckpt_trainer {
  explicit ckpt_trainer(std::string dir) : dir(std::move(dir)) {}
  /// Saves steps 1..3, waits, restores. Returns {its node, the fast writer's node, the
  /// archive writer's node, the restored step, "ok" or what went wrong}.
  std::vector<std::string> run() {
    const ckpt::options o{.fast_dir = dir + "/fast", .archive_dir = dir + "/archive"};
    auto ck = ckpt::checkpointer::open(o);
    if (!ck) return {"", "", "", "", ck.error().to_string()};
    for (int step = 1; step <= 3; ++step) {
      const auto w = weights(step);
      ckpt::snapshot s;
      s.set_step(step);
      s.add_view("w", w.data(), w.size() * sizeof(float));
      if (auto id = ck->save(s); !id) return {"", "", "", "", id.error().to_string()};
    }
    if (auto ok = ck->wait(); !ok) return {"", "", "", "", ok.error().to_string()};
    const auto reports = ck->take_reports();
    if (reports.size() != 3) return {"", "", "", "", "reports: " + std::to_string(reports.size())};
    auto back = ckpt::restore(o);
    if (!back) return {"", "", "", "", back.error().to_string()};
    return {celer::current_node_id().hex(), reports.back().fast.node.hex(),
            reports.back().archive.node.hex(), std::to_string(back->info.step), "ok"};
  }
  std::string dir;
};
ckpt_trainer* make_ckpt_trainer(std::string dir) { return new ckpt_trainer(std::move(dir)); }

CELER_REMOTE(make_ckpt_trainer, &ckpt_trainer::run);

} // namespace

TEST_CASE("checkpoint writers run on the saver's node of a local cluster",
          "[cluster][checkpoint]") {
  local_cluster cluster;
  celer::init();
  const std::string dir = (cluster.dir / "checkpoints").string();
  auto trainer = celer::actor(make_ckpt_trainer)
                   .options({.resources = {{"node1", 0.01}}})
                   .remote(dir);
  const auto got = celer::get(trainer.task(&ckpt_trainer::run).remote(), 120s);
  REQUIRE(got.size() == 5);
  REQUIRE(got[4] == "ok");
  CHECK(got[0] != celer::current_node_id().hex());  // node1, not the driver's node
  CHECK(got[1] == got[0]);
  CHECK(got[2] == got[0]);
  CHECK(got[3] == "3");

  // The driver (another node of the same machine) reads the same directories.
  auto back = ckpt::restore({.fast_dir = dir + "/fast", .archive_dir = dir + "/archive"});
  REQUIRE(back.has_value());
  CHECK(back->info.id == 3);
  CHECK(back->skipped.empty());
  const auto w = weights(3);
  const auto* e = back->data.find("w");
  REQUIRE(e != nullptr);
  REQUIRE(e->data.size() == w.size() * sizeof(float));
  CHECK(std::memcmp(e->data.data(), w.data(), e->data.size()) == 0);
  celer::kill(trainer);
}

TEST_CASE("a checkpointer's relative directories are the saver's, not its writer's process's",
          "[cluster][checkpoint]") {
  local_cluster cluster;
  celer::init();
  // The writer actor runs in a worker process of the driver's node, started elsewhere.
  const auto before = std::filesystem::current_path();
  std::filesystem::current_path(cluster.dir);
  const ckpt::options o{.archive_dir = "relative/archive"};
  {
    auto ck = ckpt::checkpointer::open(o);
    REQUIRE(ck.has_value());
    const auto w = weights(1);
    ckpt::snapshot s;
    s.set_step(1);
    s.add_view("w", w.data(), w.size() * sizeof(float));
    REQUIRE(ck->save(s).has_value());
    REQUIRE(ck->wait().has_value());
  }
  CHECK(std::filesystem::exists(cluster.dir / "relative" / "archive" / "manifests"));
  auto back = ckpt::restore(o);
  std::filesystem::current_path(before);
  REQUIRE(back.has_value());
  CHECK(back->info.step == 1);
}
