// celer::collective on an embedded runtime: member actors (threads of this process) join a
// group and run each collective; the results are checked element by element. The same on
// worker processes of a local cluster is tests/integration/collective_cluster_test.cpp.
#include <celer/actors/collective.hpp>
#include <celer/celer.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace col = celer::collective;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

/// Member `rank`'s numbers: distinct per rank and position.
std::vector<float> values(int rank, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 997)) * 0.25f;
  return v;
}

struct member {
  member(std::string name, int size, int rank, std::int64_t timeout_ms, std::int64_t chunk_bytes)
    : options{.name = std::move(name), .world_size = size, .rank = rank,
              .timeout = std::chrono::milliseconds(timeout_ms), .chunk_bytes = static_cast<std::size_t>(chunk_bytes)} {}
  std::string join() {
    auto g = col::group::join(options);
    if (!g) return g.error().message();
    group.emplace(std::move(*g));
    return "";
  }
  std::vector<float> allreduce(std::vector<float> v, int how) {
    if (auto ok = group->allreduce(std::span(v), static_cast<col::op>(how)); !ok) throw std::runtime_error(ok.error().message());
    return v;
  }
  std::vector<std::int64_t> allreduce_int(std::vector<std::int64_t> v) {
    if (auto ok = group->allreduce(std::span(v)); !ok) throw std::runtime_error(ok.error().message());
    return v;
  }
  std::vector<double> broadcast(std::vector<double> v, int root) {
    if (auto ok = group->broadcast(std::span(v), root); !ok) throw std::runtime_error(ok.error().message());
    return v;
  }
  std::vector<std::int32_t> allgather(std::vector<std::int32_t> mine) {
    auto all = group->allgather(std::span<const std::int32_t>(mine));
    if (!all) throw std::runtime_error(all.error().message());
    return *all;
  }
  std::string barrier() {
    auto ok = group->barrier();
    return ok ? "" : ok.error().message();
  }
  std::uint64_t bytes_sent() { return group->counters().bytes_sent; }
  /// Runs while barrier() waits (the member takes 2 calls at once).
  bool abort(std::string reason) {
    group->abort(reason);
    return true;
  }
  col::group_options options;
  std::optional<col::group> group;
};
member* make_member(std::string name, int size, int rank, std::int64_t timeout_ms, std::int64_t chunk_bytes) {
  return new member(std::move(name), size, rank, timeout_ms, chunk_bytes);
}

struct scoped_runtime {
  scoped_runtime() { celer::init({.num_cpus = 2}); }
  ~scoped_runtime() { celer::shutdown(); }
};

/// `n` members of group `name`, joined.
std::vector<celer::actor_handle<member>> members(const std::string& name, int n, std::int64_t chunk_bytes = 4 << 20,
                                                 std::int64_t timeout_ms = 60'000) {
  std::vector<celer::actor_handle<member>> out;
  for (int r = 0; r < n; ++r) out.push_back(celer::actor(make_member).remote(name, n, r, timeout_ms, chunk_bytes));
  std::vector<celer::object_ref<std::string>> joins;
  for (auto& m : out) joins.push_back(m.task(&member::join).remote());
  for (auto& j : joins) REQUIRE(celer::get(j).empty());
  return out;
}

} // namespace

CELER_REMOTE(make_member, &member::join, &member::allreduce, &member::allreduce_int, &member::broadcast,
             &member::allgather, &member::barrier, &member::bytes_sent, &member::abort);

TEST_CASE("allreduce gives every member the sum, mean, min and max of all", "[collective]") {
  scoped_runtime rt;
  const int n = 4;
  // 10,007 floats in pieces of 4 KiB: parts of unequal length, many pieces per part.
  auto m = members("sums", n, 4096);
  const std::size_t len = 10'007;
  for (int how : {0, 1, 2, 3}) {
    std::vector<celer::object_ref<std::vector<float>>> got;
    for (int r = 0; r < n; ++r) got.push_back(m[static_cast<std::size_t>(r)].task(&member::allreduce).remote(values(r, len), how));
    std::vector<std::vector<float>> results;
    for (auto& g : got) results.push_back(celer::get(g));
    for (std::size_t i = 0; i < len; i += 101) {
      std::vector<float> at;
      for (int r = 0; r < n; ++r) at.push_back(values(r, len)[i]);
      float want = 0;
      if (how <= 1) {
        want = std::accumulate(at.begin(), at.end(), 0.0f);  // exact: quarters of small integers
        if (how == 1) want /= n;
      } else {
        want = how == 2 ? *std::min_element(at.begin(), at.end()) : *std::max_element(at.begin(), at.end());
      }
      INFO("op " << how << ", element " << i);
      CHECK(results[0][i] == want);
    }
    for (int r = 1; r < n; ++r) CHECK(results[static_cast<std::size_t>(r)] == results[0]);  // the same bits
  }
  // Each member sent 2(n-1)/n of the data per allreduce, no more.
  const auto sent = celer::get(m[1].task(&member::bytes_sent).remote());
  CHECK(sent <= 4 * (2 * (n - 1) * (len * 4 / n + 4)));
}

TEST_CASE("allreduce of integers, a group of one, and a vector shorter than the group", "[collective]") {
  scoped_runtime rt;
  auto m = members("ints", 3);
  std::vector<celer::object_ref<std::vector<std::int64_t>>> got;
  for (int r = 0; r < 3; ++r) got.push_back(m[static_cast<std::size_t>(r)].task(&member::allreduce_int).remote(std::vector<std::int64_t>{r + 1, 10 * r}));
  for (auto& g : got) CHECK(celer::get(g) == std::vector<std::int64_t>{6, 30});
  auto one = members("alone", 1);
  CHECK(celer::get(one[0].task(&member::allreduce_int).remote(std::vector<std::int64_t>{7})) == std::vector<std::int64_t>{7});
}

TEST_CASE("broadcast copies the root's data, allgather concatenates in rank order, barrier meets", "[collective]") {
  scoped_runtime rt;
  const int n = 3;
  auto m = members("bcast", n, 1000);
  const std::vector<double> root_data(5000, 2.5);
  std::vector<celer::object_ref<std::vector<double>>> b;
  for (int r = 0; r < n; ++r) {
    b.push_back(m[static_cast<std::size_t>(r)].task(&member::broadcast).remote(r == 2 ? root_data : std::vector<double>(5000, -1.0), 2));
  }
  for (auto& x : b) CHECK(celer::get(x) == root_data);
  std::vector<celer::object_ref<std::vector<std::int32_t>>> a;
  for (int r = 0; r < n; ++r) a.push_back(m[static_cast<std::size_t>(r)].task(&member::allgather).remote(std::vector<std::int32_t>{r, r, r}));
  for (auto& x : a) CHECK(celer::get(x) == std::vector<std::int32_t>{0, 0, 0, 1, 1, 1, 2, 2, 2});
  std::vector<celer::object_ref<std::string>> bar;
  for (int r = 0; r < n; ++r) bar.push_back(m[static_cast<std::size_t>(r)].task(&member::barrier).remote());
  for (auto& x : bar) CHECK(celer::get(x).empty());
}

TEST_CASE("a member that does not come breaks the group, naming the rank waited for", "[collective]") {
  scoped_runtime rt;
  auto m = members("missing", 3, 4 << 20, /*timeout_ms=*/300);
  // Ranks 0 and 1 allreduce; rank 2 never does.
  auto r0 = m[0].task(&member::barrier).remote();
  auto r1 = m[1].task(&member::barrier).remote();
  const auto e0 = celer::get(r0), e1 = celer::get(r1);
  CHECK_THAT(e0 + e1, Contains("waiting for rank"));
  CHECK_THAT(e0 + e1, Contains("missing"));
  // Broken: the next call says so at once, and how to mend it.
  CHECK_THAT(celer::get(m[0].task(&member::barrier).remote()), Contains("broken") && Contains("join again"));
}

TEST_CASE("abort from another thread ends a member's wait at once, long before the timeout", "[collective]") {
  scoped_runtime rt;
  // Ranks 0 and 1 wait in a barrier for rank 2, which never comes; their timeout is 60 s.
  const int n = 3;
  std::vector<celer::actor_handle<member>> m;
  for (int r = 0; r < n; ++r)
    m.push_back(celer::actor(make_member).options({.max_concurrency = 2}).remote(std::string("aborted"), n, r, 60'000, 4 << 20));
  std::vector<celer::object_ref<std::string>> joins;
  for (auto& x : m) joins.push_back(x.task(&member::join).remote());
  for (auto& j : joins) REQUIRE(celer::get(j).empty());
  const auto began = std::chrono::steady_clock::now();
  auto r0 = m[0].task(&member::barrier).remote();
  auto r1 = m[1].task(&member::barrier).remote();
  // The supervisor learned that rank 2 died: it aborts the survivors (rank 1 is still in
  // its barrier, or has not begun it: either way the barrier fails).
  CHECK(celer::get(m[0].task(&member::abort).remote(std::string("rank 2 died"))));
  CHECK(celer::get(m[1].task(&member::abort).remote(std::string("rank 2 died"))));
  const auto e0 = celer::get(r0), e1 = celer::get(r1);
  CHECK(std::chrono::steady_clock::now() - began < 10s);
  CHECK_THAT(e0, Contains("aborted: rank 2 died"));
  CHECK_THAT(e1, Contains("aborted: rank 2 died"));
  // The group is broken now: the next call says so at once.
  CHECK_THAT(celer::get(m[0].task(&member::barrier).remote()), Contains("broken") && Contains("aborted"));
}

TEST_CASE("joining says what is wrong: bad options, a rank taken twice, too few members", "[collective]") {
  scoped_runtime rt;
  CHECK(col::group::join({.name = "", .world_size = 2, .rank = 0}).error().code() == celer::error_code::invalid_argument);
  CHECK(col::group::join({.name = "g", .world_size = 2, .rank = 2}).error().code() == celer::error_code::invalid_argument);
  CHECK(col::group::join({.name = "g", .world_size = 0, .rank = 0}).error().code() == celer::error_code::invalid_argument);
  // A piece must fit one peer message.
  CHECK(col::group::join({.name = "g", .world_size = 1, .rank = 0, .chunk_bytes = celer::peer::max_payload + 1})
          .error()
          .code() == celer::error_code::invalid_argument);
  // One of two members comes: the join times out, counting who came.
  const auto alone = col::group::join({.name = "half", .world_size = 2, .rank = 0, .timeout = 200ms});
  REQUIRE_FALSE(alone);
  CHECK(alone.error().code() == celer::error_code::deadline_exceeded);
  CHECK_THAT(alone.error().message(), Contains("1 of 2"));
}
