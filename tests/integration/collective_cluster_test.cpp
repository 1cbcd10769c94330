// celer::peer and celer::collective between worker processes of a real local cluster: the
// messages go over the wire (bulk frames) until the receiver grants a lane, then through
// shared memory (the nodes are on one machine), between members on different nodes.
#include <catch2/catch.hpp>

#include "local_cluster.hpp"

#include <celer/actors/collective.hpp>
#include <celer/celer.hpp>

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

CELER_REMOTE(make_ring_member, &ring_member::run);

} // namespace

TEST_CASE("a collective group of worker processes allreduces 24 MB between processes, then through shared-memory "
          "lanes",
          "[cluster][collective]") {
  local_cluster cluster;
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
