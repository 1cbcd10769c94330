// celer::peer and celer::collective between worker processes of a real local cluster: the
// messages go over the wire (bulk frames), between members on different nodes.
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
  /// element, bytes sent}; or throws.
  std::vector<double> run(std::int64_t floats) {
    auto g = col::group::join({.name = "cluster-ring", .world_size = size, .rank = rank});
    if (!g) throw std::runtime_error(g.error().message());
    std::vector<float> v(static_cast<std::size_t>(floats), static_cast<float>(rank + 1));
    if (auto ok = g->allreduce(std::span(v)); !ok) throw std::runtime_error(ok.error().message());
    if (auto ok = g->barrier(); !ok) throw std::runtime_error(ok.error().message());
    return {static_cast<double>(::getpid()), v.front(), v.back(), static_cast<double>(g->counters().bytes_sent)};
  }
  int size, rank;
};
ring_member* make_ring_member(int size, int rank) { return new ring_member(size, rank); }

CELER_REMOTE(make_ring_member, &ring_member::run);

} // namespace

TEST_CASE("a collective group of worker processes allreduces 24 MB over the wire", "[cluster][collective]") {
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
    REQUIRE(got.size() == 4);
    CHECK(got[1] == 6.0);  // 1 + 2 + 3
    CHECK(got[2] == 6.0);
    CHECK(got[3] < 2.0 * 8'000'012 * 2 / 3 + 1e6);  // 2(n-1)/n of the data, and pieces' headers
    pids.push_back(got[0]);
  }
  CHECK(pids[0] != pids[1]);  // separate processes: the bytes crossed sockets
  CHECK(pids[1] != pids[2]);
}
