// celer::peer and celer::collective between worker processes of a real local cluster: the
// messages go over the wire (bulk frames) until the receiver grants a lane, then through
// shared memory (the nodes are on one machine), between members on different nodes.
#include <catch2/catch.hpp>

#include "local_cluster.hpp"

#include <celer/actors/collective.hpp>
#include <celer/celer.hpp>

#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace celer_it;
namespace col = celer::collective;

namespace {

struct ring_member {
  ring_member(int size, int rank) : size(size), rank(rank) {}
  /// Joins, allreduces `floats` numbers (rank + 1 each) and returns {pid, the first and last
  /// element, bytes sent, then: bytes sent through lanes, in messages, lanes open}; or throws.
  /// After the first allreduce the members go on allreducing 1 MB until every one of them has
  /// sent through a lane (its first pieces went in messages while the lane was granted).
  std::vector<double> run(std::int64_t floats) {
    auto g = col::group::join({.name = "cluster-ring", .world_size = size, .rank = rank});
    if (!g) throw std::runtime_error(g.error().message());
    std::vector<float> v(static_cast<std::size_t>(floats), static_cast<float>(rank + 1));
    if (auto ok = g->allreduce(std::span(v)); !ok) throw std::runtime_error(ok.error().message());
    if (auto ok = g->barrier(); !ok) throw std::runtime_error(ok.error().message());
    const double sent = static_cast<double>(g->counters().bytes_sent);
    std::vector<float> more(250'000, 1.0f);
    for (int i = 0; i < 200; ++i) {
      std::uint8_t waiting = celer::peer::stats().bytes_sent_shared == 0 ? 1 : 0;
      if (auto ok = g->allreduce(std::span(&waiting, 1), col::op::max); !ok) throw std::runtime_error(ok.error().message());
      if (waiting == 0) break;
      if (auto ok = g->allreduce(std::span(more)); !ok) throw std::runtime_error(ok.error().message());
    }
    const auto p = celer::peer::stats();
    return {static_cast<double>(::getpid()), v.front(), v.back(), sent, static_cast<double>(p.bytes_sent_shared),
            static_cast<double>(p.bytes_sent_message), static_cast<double>(p.lanes_out)};
  }
  int size, rank;
};
ring_member* make_ring_member(int size, int rank) { return new ring_member(size, rank); }

struct node_member {
  node_member(int size, int rank) : size(size), rank(rank) {}
  /// Joins a group with local groups by node and allreduces `floats` numbers whose sums are
  /// not exact in float32. Returns {local group size, the first element, a hash of all the
  /// result's bits, bytes sent}.
  std::vector<double> run(std::int64_t floats) {
    auto g = col::group::join({.name = "cluster-nodes", .world_size = size, .rank = rank,
                               .chunk_bytes = 1 << 20, .hierarchy = col::grouping::by_node});
    if (!g) throw std::runtime_error(g.error().message());
    std::vector<float> v(static_cast<std::size_t>(floats));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>(rank + 1) * static_cast<float>(i % 7 + 1);
    if (auto ok = g->allreduce(std::span(v)); !ok) throw std::runtime_error(ok.error().message());
    std::uint32_t hash = 2166136261u;  // FNV-1a over the bits
    for (float x : v) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &x, sizeof bits);
      hash = (hash ^ bits) * 16777619u;
    }
    return {static_cast<double>(g->local_size()), v.front(), static_cast<double>(hash),
            static_cast<double>(g->counters().bytes_sent)};
  }
  int size, rank;
};
node_member* make_node_member(int size, int rank) { return new node_member(size, rank); }

CELER_REMOTE(make_ring_member, &ring_member::run, make_node_member, &node_member::run);

} // namespace

TEST_CASE("a collective group of worker processes allreduces 24 MB between processes, then through shared-memory "
          "lanes",
          "[cluster][collective]") {
  // No node dies here: a long node timeout keeps a late heartbeat on a loaded machine from
  // declaring node2 dead (its members then "can never be placed").
  local_cluster cluster(10000);
  celer::init();
  const int n = 3;
  std::vector<celer::actor_handle<ring_member>> members;
  for (int r = 0; r < n; ++r) {
    // Ranks 0 and 2 on node1, rank 1 on node2: some hops cross nodes.
    celer::actor_options o;
    o.resources = {{r == 1 ? "node2" : "node1", 0.01}};
    members.push_back(celer::actor(make_ring_member).options(o).remote(n, r));
  }
  const std::int64_t floats = 2'000'003;  // 8 MB each, parts of unequal length
  std::vector<celer::object_ref<std::vector<double>>> runs;
  for (auto& m : members) runs.push_back(m.task(&ring_member::run).remote(floats));
  std::vector<double> pids;
  for (auto& r : runs) {
    const auto got = celer::get(r, 120s);
    REQUIRE(got.size() == 7);
    CHECK(got[1] == 6.0);  // 1 + 2 + 3
    CHECK(got[2] == 6.0);
    CHECK(got[3] < 2.0 * 8'000'012 * 2 / 3 + 1e6);  // 2(n-1)/n of the data, and pieces' headers
    CHECK(got[4] > 0);   // bytes through a lane: the members are on one machine
    CHECK(got[5] > 0);   // the first pieces, sent before the lane was granted
    CHECK(got[6] == 1);  // one lane: to the next rank
    pids.push_back(got[0]);
  }
  CHECK(pids[0] != pids[1]);  // separate processes: the bytes crossed sockets
  CHECK(pids[1] != pids[2]);
}

TEST_CASE("a hierarchical allreduce by node reduces on each of two nodes, then across them, the same bits everywhere",
          "[cluster][collective]") {
  // No node dies here: a long node timeout keeps a late heartbeat on a loaded machine from
  // declaring node2 dead (its members then "can never be placed").
  local_cluster cluster(10000);
  celer::init();
  const int n = 4;
  std::vector<celer::actor_handle<node_member>> members;
  for (int r = 0; r < n; ++r) {
    // Ranks 0 and 2 on node1, 1 and 3 on node2: each node's local group interleaves the ranks.
    celer::actor_options o;
    o.resources = {{r % 2 == 1 ? "node2" : "node1", 0.01}};
    members.push_back(celer::actor(make_node_member).options(o).remote(n, r));
  }
  const std::int64_t floats = 1'000'003;
  std::vector<celer::object_ref<std::vector<double>>> runs;
  for (auto& m : members) runs.push_back(m.task(&node_member::run).remote(floats));
  std::vector<std::vector<double>> got;
  for (auto& r : runs) got.push_back(celer::get(r, 120s));
  for (int r = 0; r < n; ++r) {
    const auto& g = got[static_cast<std::size_t>(r)];
    REQUIRE(g.size() == 4);
    CHECK(g[0] == 2);                             // two members on each node
    CHECK(std::abs(g[1] - 0.1 * 10) < 1e-5);      // 0.1 * (1 + 2 + 3 + 4)
    CHECK(g[2] == got[0][2]);                     // the same bits on every member
  }
  // Leaders (ranks 0 and 1) send across nodes; the others only to their leader's ring.
  const double data = 4.0 * floats;
  CHECK(got[2][3] < data + 1e6);                  // local ring: half the data, then nothing
  CHECK(got[0][3] > got[2][3]);
}
