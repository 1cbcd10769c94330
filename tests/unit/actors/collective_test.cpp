// celer::collective on an embedded runtime: member actors (threads of this process) join a
// group and run each collective; the results are checked element by element. The same on
// worker processes of a local cluster is tests/integration/collective_cluster_test.cpp.
#include <celer/actors/collective.hpp>
#include <celer/celer.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
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
  int local_size() { return group->local_size(); }
  /// `steps` allreduce_sign calls of `v` (the same values each step), then one float
  /// allreduce of `v`. Returns {bytes the sign steps sent, bytes the float allreduce sent,
  /// then the mean of the steps' results (v.size() values), then the last step's result}.
  std::vector<double> sign_steps(std::vector<float> v, int steps) {
    col::sign_feedback feedback;
    std::vector<double> mean(v.size(), 0.0), last;
    const auto before = group->counters().bytes_sent;
    for (int t = 0; t < steps; ++t) {
      auto x = v;
      if (auto ok = group->allreduce_sign(std::span(x), feedback); !ok) throw std::runtime_error(ok.error().message());
      for (std::size_t i = 0; i < x.size(); ++i) mean[i] += x[i] / static_cast<double>(steps);
      last.assign(x.begin(), x.end());
    }
    const auto sign_bytes = group->counters().bytes_sent - before;
    if (auto ok = group->allreduce(std::span(v)); !ok) throw std::runtime_error(ok.error().message());
    const auto float_bytes = group->counters().bytes_sent - before - sign_bytes;
    std::vector<double> out{static_cast<double>(sign_bytes) / steps, static_cast<double>(float_bytes)};
    out.insert(out.end(), mean.begin(), mean.end());
    out.insert(out.end(), last.begin(), last.end());
    return out;
  }
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

/// A member of a group with local groups by label (`label` empty: by node).
member* make_local_member(std::string name, int size, int rank, std::string label) {
  auto* m = new member(std::move(name), size, rank, /*timeout_ms=*/60'000, /*chunk_bytes=*/4096);
  m->options.hierarchy = label.empty() ? col::grouping::by_node : col::grouping::by_label;
  m->options.local_group = std::move(label);
  return m;
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

/// Members of group `name` in the local groups `labels` (one per rank; "" for by_node), joined.
std::vector<celer::actor_handle<member>> local_members(const std::string& name, const std::vector<std::string>& labels) {
  const int n = static_cast<int>(labels.size());
  std::vector<celer::actor_handle<member>> out;
  for (int r = 0; r < n; ++r) out.push_back(celer::actor(make_local_member).remote(name, n, r, labels[static_cast<std::size_t>(r)]));
  std::vector<celer::object_ref<std::string>> joins;
  for (auto& m : out) joins.push_back(m.task(&member::join).remote());
  for (auto& j : joins) REQUIRE(celer::get(j).empty());
  return out;
}

/// Each of `m` allreduces values(rank, len) with `how`; their results, by rank.
std::vector<std::vector<float>> allreduce_all(std::vector<celer::actor_handle<member>>& m, std::size_t len, int how) {
  std::vector<celer::object_ref<std::vector<float>>> got;
  for (std::size_t r = 0; r < m.size(); ++r) got.push_back(m[r].task(&member::allreduce).remote(values(static_cast<int>(r), len), how));
  std::vector<std::vector<float>> out;
  for (auto& g : got) out.push_back(celer::get(g));
  return out;
}

} // namespace

CELER_REMOTE(make_member, &member::join, &member::allreduce, &member::allreduce_int, &member::broadcast,
             &member::allgather, &member::barrier, &member::bytes_sent, make_local_member, &member::local_size, &member::sign_steps,
             &member::abort);

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

TEST_CASE("a hierarchical allreduce by label gives the flat ring's sums, the same bits on every member",
          "[collective]") {
  scoped_runtime rt;
  // Ranks 0 and 2 in group a, 1 and 3 in b: the local groups interleave the ranks.
  auto flat = members("flat-4", 4, 4096);
  auto tiered = local_members("tiered-4", {"a", "b", "a", "b"});
  CHECK(celer::get(tiered[1].task(&member::local_size).remote()) == 2);
  const std::size_t len = 10'007;
  for (int how : {0, 1, 2, 3}) {
    INFO("op " << how);
    const auto want = allreduce_all(flat, len, how);
    const auto got = allreduce_all(tiered, len, how);
    for (std::size_t r = 0; r < got.size(); ++r) CHECK(got[r] == want[0]);  // exact: quarters of small integers
  }
  // Unequal groups (3, 1 and 1 members): the same bits everywhere, the right sums.
  auto uneven = local_members("uneven-5", {"x", "x", "y", "x", "z"});
  CHECK(celer::get(uneven[0].task(&member::local_size).remote()) == 3);
  CHECK(celer::get(uneven[2].task(&member::local_size).remote()) == 1);
  const auto sums = allreduce_all(uneven, len, 0);
  for (std::size_t i = 0; i < len; i += 97) {
    float want = 0;
    for (int r = 0; r < 5; ++r) want += values(r, len)[i];
    CHECK(sums[0][i] == want);
  }
  for (std::size_t r = 1; r < sums.size(); ++r) CHECK(sums[r] == sums[0]);
}

TEST_CASE("a hierarchical allreduce by node on one node is one local group, by label needs a label, all members need one hierarchy",
          "[collective]") {
  scoped_runtime rt;
  auto m = local_members("by-node-3", {"", "", ""});
  CHECK(celer::get(m[2].task(&member::local_size).remote()) == 3);
  const auto got = allreduce_all(m, 1000, 0);
  CHECK(got[0][5] == values(0, 1000)[5] + values(1, 1000)[5] + values(2, 1000)[5]);
  CHECK(got[1] == got[0]);
  CHECK(got[2] == got[0]);
  const auto unlabelled = col::group::join({.name = "g", .world_size = 1, .rank = 0, .hierarchy = col::grouping::by_label});
  REQUIRE_FALSE(unlabelled);
  CHECK(unlabelled.error().code() == celer::error_code::invalid_argument);
  CHECK_THAT(unlabelled.error().message(), Contains("local_group"));
  // Members that ask for different hierarchies: the later one is refused, saying so.
  const auto flat = col::group::join({.name = "mixed", .world_size = 2, .rank = 0, .timeout = 200ms});
  CHECK(flat.error().code() == celer::error_code::deadline_exceeded);  // rank 1 never joins it
  const auto tiered = col::group::join({.name = "mixed", .world_size = 2, .rank = 1, .timeout = 200ms,
                                        .hierarchy = col::grouping::by_label, .local_group = "a"});
  REQUIRE_FALSE(tiered);
  CHECK(tiered.error().code() == celer::error_code::invalid_argument);
  CHECK_THAT(tiered.error().message(), Contains("different hierarchies"));
}

TEST_CASE("allreduce_sign sends over 30 times fewer bytes than allreduce, the same bits everywhere, and error "
          "feedback brings the mean of its steps to the true mean",
          "[collective]") {
  scoped_runtime rt;
  const int n = 4;
  auto m = members("sign", n, 64 << 10);
  const std::size_t len = 100'003;
  const int steps = 40;
  // Values of both signs and several magnitudes, different on each member.
  auto input = [&](int r) {
    std::vector<float> v(len);
    for (std::size_t i = 0; i < len; ++i) {
      v[i] = std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(r)) * static_cast<float>(1 + (i / 1000) % 5);
    }
    return v;
  };
  std::vector<celer::object_ref<std::vector<double>>> runs;
  for (int r = 0; r < n; ++r) runs.push_back(m[static_cast<std::size_t>(r)].task(&member::sign_steps).remote(input(r), steps));
  std::vector<std::vector<double>> got;
  for (auto& x : runs) got.push_back(celer::get(x));
  for (const auto& g : got) {
    REQUIRE(g.size() == 2 + 2 * len);
    INFO("sign bytes a step " << g[0] << ", float bytes " << g[1]);
    CHECK(g[1] / g[0] > 30.0);
    CHECK(std::equal(g.begin() + 2 + len, g.end(), got[0].begin() + 2 + len));  // the same bits
  }
  // The true mean, and how far the mean of the steps' results is from it.
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(input(r));
  double error = 0, norm = 0;
  for (std::size_t i = 0; i < len; ++i) {
    double want = 0;
    for (const auto& v : inputs) want += v[i];
    want /= n;
    error += (got[0][2 + i] - want) * (got[0][2 + i] - want);
    norm += want * want;
  }
  INFO("relative error of the mean of " << steps << " steps: " << std::sqrt(error / norm));
  CHECK(std::sqrt(error / norm) < 0.1);
}
