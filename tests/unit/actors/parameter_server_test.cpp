// celer::parameter_server on an embedded runtime: server actors (threads of this process) called
// straight from the test, and worker actors driving the sharded client. Checks the update
// rules against hand computations, the staleness bound (a fast worker is held until the
// slow one catches up; staleness 0 is lockstep), the shards, and the errors.
#include <celer/actors/parameter_server.hpp>
#include <celer/celer.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

namespace ps = celer::parameter_server;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

struct scoped_runtime {
  scoped_runtime() { celer::init({.num_cpus = 2}); }
  ~scoped_runtime() { celer::shutdown(); }
};

celer::actor_handle<ps::server> make(ps::server_options o) {
  const int threads = o.num_workers + 4;
  return celer::actor(ps::make_server).options({.max_concurrency = threads}).remote(std::move(o));
}

ps::reply push(const celer::actor_handle<ps::server>& s, int worker, std::int64_t step, std::vector<float> g) {
  return celer::get(s.task(&ps::server::push).remote(worker, step, celer::array<float>(g)));
}

std::vector<float> weights_of(const ps::reply& r) { return r.weights.to_vector(); }

/// Waits until `n` calls wait at the server's bound: the event the staleness tests wait for
/// (each check is a call to the server; bounded by a deadline).
void until_waiting(const celer::actor_handle<ps::server>& s, std::int64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (celer::get(s.task(&ps::server::stats).remote()).waiting != n) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
}

template <class T>
bool ready(const celer::object_ref<T>& r) {
  return celer::wait(std::vector{r}, 1, 0ms).ready.size() == 1;
}

/// A worker actor driving the sharded client: `steps` steps of push_pull with a gradient of
/// its own, recording how far ahead of the slowest worker each pull let it be.
struct ps_worker {
  ps_worker(ps::sharded servers, int rank) : servers(std::move(servers)), rank(rank) {}
  std::vector<std::int64_t> run(std::int64_t steps) {
    std::vector<float> buffer(servers.size());
    std::vector<std::int64_t> ahead;
    for (std::int64_t t = 1; t <= steps; ++t) {
      std::fill(buffer.begin(), buffer.end(), static_cast<float>(rank + 1));  // worker 0: 1s, worker 1: 2s
      auto got = servers.push_pull(rank, t, buffer, buffer);
      if (!got) throw std::runtime_error(got.error().message());
      // The weights pulled are for step t + 1: this worker is (t + 1) - 1 - slowest ahead.
      ahead.push_back(t - got->slowest_clock);
    }
    if (auto ok = servers.retire(rank); !ok) throw std::runtime_error(ok.error().message());
    return ahead;
  }
  ps::sharded servers;
  int rank;
};
ps_worker* make_ps_worker(ps::sharded servers, int rank) { return new ps_worker(std::move(servers), rank); }

} // namespace

CELER_REMOTE(make_ps_worker, &ps_worker::run);

TEST_CASE("a parameter server applies SGD, Nesterov momentum, Adam and AdamW as a hand computation does", "[parameter_server]") {
  scoped_runtime rt;
  const std::vector<float> w0{1.0f, -2.0f, 0.5f};
  const std::vector<float> g1{0.5f, -3.0f, 0.0f}, g2{0.25f, 1.0f, -1.0f};
  auto two_steps = [&](ps::optimizer_options opt) {
    // staleness 1: each push is applied at once, as its own step.
    auto s = make({.size = 3, .num_workers = 1, .staleness = 1, .optimizer = opt});
    REQUIRE(celer::get(s.task(&ps::server::init).remote(ps::shard_state{.weights = w0})).code == 0);
    auto first = push(s, 0, 1, g1);
    REQUIRE(first.code == 0);
    CHECK(first.version == 1);
    auto second = push(s, 0, 2, g2);
    REQUIRE(second.code == 0);
    CHECK(second.version == 2);
    auto after = celer::get(s.task(&ps::server::pull).remote(0, 3));
    REQUIRE(after.code == 0);
    return weights_of(after);
  };

  SECTION("plain SGD: w - lr (g1 + g2)") {
    const auto w = two_steps({.name = "sgd", .lr = 0.5});
    CHECK(w[0] == Approx(1.0 - 0.5 * 0.75));   // 0.625
    CHECK(w[1] == Approx(-2.0 - 0.5 * -2.0));  // -1.0
    CHECK(w[2] == Approx(0.5 - 0.5 * -1.0));   // 1.0
  }
  SECTION("SGD with Nesterov momentum and L2, as LibTorch's") {
    const double lr = 0.1, mu = 0.9, wd = 0.01;
    const auto w = two_steps({.name = "sgd", .lr = lr, .momentum = mu, .nesterov = true, .weight_decay = wd});
    for (std::size_t i = 0; i < 3; ++i) {
      // Step 1: the buffer starts as the gradient (with its L2 term).
      double x = w0[i], d = g1[i] + wd * x, buf = d;
      x -= lr * (d + mu * buf);
      // Step 2: buf = mu buf + d; Nesterov's step is d + mu buf.
      d = g2[i] + wd * x;
      buf = mu * buf + d;
      x -= lr * (d + mu * buf);
      CHECK(w[i] == Approx(x).epsilon(1e-6));
    }
  }
  SECTION("Adam: the first step moves each weight by lr against its gradient's sign") {
    const double lr = 0.01;
    const auto w = two_steps({.name = "adam", .lr = lr});
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (std::size_t i = 0; i < 3; ++i) {
      double x = w0[i], m = 0, v = 0;
      for (int t = 1; t <= 2; ++t) {
        const double g = t == 1 ? g1[i] : g2[i];
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g * g;
        const double mhat = m / (1 - std::pow(b1, t));
        const double denom = std::sqrt(v) / std::sqrt(1 - std::pow(b2, t)) + eps;
        x -= lr * mhat / denom;
        // After step 1, |x - w0| is lr where the gradient is not 0 (m̂ / √v̂ = sign g).
        if (t == 1 && g != 0) CHECK(std::abs(x - w0[i]) == Approx(lr).epsilon(1e-6));
      }
      CHECK(w[i] == Approx(x).epsilon(1e-5));
    }
  }
  SECTION("AdamW decays the weights apart from the gradient") {
    const double lr = 0.01, wd = 0.1;
    const auto w = two_steps({.name = "adamw", .lr = lr, .weight_decay = wd});
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (std::size_t i = 0; i < 3; ++i) {
      double x = w0[i], m = 0, v = 0;
      for (int t = 1; t <= 2; ++t) {
        const double g = t == 1 ? g1[i] : g2[i];
        x *= 1 - lr * wd;
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g * g;
        x -= lr / (1 - std::pow(b1, t)) * m / (std::sqrt(v) / std::sqrt(1 - std::pow(b2, t)) + eps);
      }
      CHECK(w[i] == Approx(x).epsilon(1e-5));
    }
  }
}

TEST_CASE("a parameter server carries on the optimiser state given to init: Adam's moments and step count", "[parameter_server]") {
  scoped_runtime rt;
  // As a switch from synchronous training after 10 steps hands LibTorch's Adam state over.
  auto s = make({.size = 1, .num_workers = 1, .staleness = 1, .optimizer = {.name = "adam", .lr = 0.1}});
  const ps::shard_state given{.weights = {2.0f}, .first = {0.5f}, .second = {0.04f}, .optimizer_steps = 10, .clock = 10};
  REQUIRE(celer::get(s.task(&ps::server::init).remote(given)).code == 0);
  const auto r = push(s, 0, 11, {1.0f});  // clock 10: the next step is 11
  REQUIRE(r.code == 0);
  const double m = 0.9 * 0.5 + 0.1 * 1.0, v = 0.999 * 0.04 + 0.001 * 1.0;
  const double want = 2.0 - 0.1 / (1 - std::pow(0.9, 11)) * m / (std::sqrt(v) / std::sqrt(1 - std::pow(0.999, 11)) + 1e-8);
  const auto back = celer::get(s.task(&ps::server::state).remote());
  REQUIRE(back.code == 0);
  CHECK(back.state.weights[0] == Approx(want).epsilon(1e-6));
  CHECK(back.state.first[0] == Approx(m));
  CHECK(back.state.second[0] == Approx(v));
  CHECK(back.state.optimizer_steps == 11);
  CHECK(back.state.clock == 11);
}

TEST_CASE("staleness 0 is synchronous: a step's gradients are averaged and applied once the last worker pushes", "[parameter_server]") {
  scoped_runtime rt;
  auto s = make({.size = 2, .num_workers = 2, .staleness = 0, .optimizer = {.name = "sgd", .lr = 1.0}});
  REQUIRE(celer::get(s.task(&ps::server::init).remote(ps::shard_state{.weights = {0.0f, 0.0f}})).code == 0);
  // Worker 0 pushes step 1 and asks for step 2's weights: it must wait for worker 1.
  const auto r0 = push(s, 0, 1, {1.0f, 2.0f});
  REQUIRE(r0.code == 0);
  CHECK(r0.version == 0);  // nothing applied yet
  auto pulled = s.task(&ps::server::pull).remote(0, 2);
  until_waiting(s, 1);
  CHECK_FALSE(ready(pulled));
  // Worker 1 may read step 1's weights (nobody is ahead of it), then pushes: the mean goes in.
  const auto w1 = celer::get(s.task(&ps::server::pull).remote(1, 1));
  CHECK(weights_of(w1) == std::vector<float>{0.0f, 0.0f});
  const auto r1 = push(s, 1, 1, {3.0f, 4.0f});
  REQUIRE(r1.code == 0);
  CHECK(r1.version == 1);
  const auto got = celer::get(pulled);
  REQUIRE(got.code == 0);
  CHECK(weights_of(got) == std::vector<float>{-2.0f, -3.0f});  // 0 - 1 x mean({1,2}, {3,4})
  CHECK(got.version == 1);
  CHECK(got.slowest_clock == 1);
  CHECK(got.waited_seconds > 0);
  // Lockstep: worker 0 may push step 2 (taken, not applied: worker 1's is missing), but not
  // step 3 until worker 1 has pushed step 2.
  const auto taken = push(s, 0, 2, {1.0f, 1.0f});
  REQUIRE(taken.code == 0);
  CHECK(taken.version == 1);
  auto early = s.task(&ps::server::push).remote(0, 3, celer::array<float>{1.0f, 1.0f});
  until_waiting(s, 1);
  CHECK_FALSE(ready(early));
  CHECK(push(s, 1, 2, {3.0f, 3.0f}).version == 2);  // step 2's mean goes in
  const auto released = celer::get(early);
  REQUIRE(released.code == 0);
  CHECK(released.version == 2);
  const auto stats = celer::get(s.task(&ps::server::stats).remote());
  CHECK(stats.version == 2);
  CHECK(stats.clocks == std::vector<std::int64_t>{3, 2});
  CHECK(stats.waits == 2);
}

TEST_CASE("a worker more than staleness steps ahead of the slowest is held until the slow one catches up", "[parameter_server]") {
  scoped_runtime rt;
  auto s = make({.size = 1, .num_workers = 2, .staleness = 2, .optimizer = {.name = "sgd", .lr = 1.0}});
  REQUIRE(celer::get(s.task(&ps::server::init).remote(ps::shard_state{.weights = {0.0f}})).code == 0);
  auto push_pull = [&](int worker, std::int64_t step, float g) {
    return s.task(&ps::server::push_pull).remote(worker, step, celer::array<float>{g});
  };
  // Worker 0 runs steps 1 and 2 while worker 1 has done nothing: within the bound.
  CHECK(celer::get(push_pull(0, 1, 1.0f)).code == 0);
  const auto second = celer::get(push_pull(0, 2, 1.0f));
  CHECK(second.code == 0);
  CHECK(second.waited_seconds == 0);
  // Step 3's push goes in (worker 0 computed it from step 3's weights, which needed worker 1
  // at step 0), but step 4's weights need worker 1 past step 1: held.
  auto third = push_pull(0, 3, 1.0f);
  until_waiting(s, 1);
  CHECK_FALSE(ready(third));
  CHECK(celer::get(s.task(&ps::server::stats).remote()).version == 3);  // applied at once (staleness > 0)
  REQUIRE(push(s, 1, 1, {10.0f}).code == 0);
  const auto got = celer::get(third);
  REQUIRE(got.code == 0);
  CHECK(got.slowest_clock == 1);
  CHECK(got.version == 4);
  CHECK(got.waited_seconds > 0);
  CHECK(weights_of(got) == std::vector<float>{-13.0f});  // three pushes of 1 and one of 10, lr 1
  // A retired worker holds nobody back: worker 0 runs on past the bound.
  REQUIRE(celer::get(s.task(&ps::server::retire).remote(1)).code == 0);
  for (std::int64_t t = 4; t <= 8; ++t) CHECK(celer::get(push_pull(0, t, 0.0f)).code == 0);
}

TEST_CASE("workers through the sharded client stay within the bound, and staleness 0 keeps them in lockstep", "[parameter_server]") {
  scoped_runtime rt;
  for (int staleness : {0, 1, 3}) {
    INFO("staleness " << staleness);
    const std::uint64_t size = 1001;  // three shards of 334, 334 and 333
    auto servers = ps::sharded::create({.size = size, .num_shards = 3, .num_workers = 2, .staleness = staleness,
                                        .optimizer = {.name = "sgd", .lr = 0.001}});
    REQUIRE(servers);
    REQUIRE(servers->init({.weights = std::vector<float>(size, 1.0f)}));
    const std::int64_t steps = 30;
    std::vector<celer::object_ref<std::vector<std::int64_t>>> runs;
    for (int r = 0; r < 2; ++r)
      runs.push_back(celer::actor(make_ps_worker).remote(*servers, r).task(&ps_worker::run).remote(steps));
    for (auto& run : runs) {
      const auto ahead = celer::get(run);
      REQUIRE(ahead.size() == static_cast<std::size_t>(steps));
      // Never more than `staleness` steps ahead of the slowest when it read.
      for (auto a : ahead) CHECK(a <= staleness);
    }
    auto stats = servers->stats();
    REQUIRE(stats);
    REQUIRE(stats->size() == 3);
    for (const auto& st : *stats) {
      CHECK(st.clocks == std::vector<std::int64_t>{steps, steps});
      CHECK(st.pushes == 2 * steps);
      // staleness 0: one update per step (the mean); otherwise one per push.
      CHECK(st.version == (staleness == 0 ? steps : 2 * steps));
    }
    auto state = servers->state();
    REQUIRE(state);
    REQUIRE(state->weights.size() == size);
    // Gradients 1 and 2 every step, lr 0.001: 30 steps of their mean, or 30 of each.
    const double want = staleness == 0 ? 1.0 - 0.001 * 1.5 * steps : 1.0 - 0.001 * 3.0 * steps;
    for (float w : state->weights) CHECK(w == Approx(want).epsilon(1e-5));
    servers->stop();
  }
}

TEST_CASE("a flat vector splits into contiguous shards as even as can be and concatenates back", "[parameter_server]") {
  CHECK(ps::shard_range(10, 3, 0) == std::pair<std::size_t, std::size_t>{0, 4});
  CHECK(ps::shard_range(10, 3, 1) == std::pair<std::size_t, std::size_t>{4, 7});
  CHECK(ps::shard_range(10, 3, 2) == std::pair<std::size_t, std::size_t>{7, 10});
  CHECK(ps::shard_range(4, 4, 3) == std::pair<std::size_t, std::size_t>{3, 4});
  std::vector<float> whole(10);
  for (std::size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(i);
  const auto parts = ps::split(whole, 3);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0] == std::vector<float>{0, 1, 2, 3});
  CHECK(parts[1] == std::vector<float>{4, 5, 6});
  CHECK(parts[2] == std::vector<float>{7, 8, 9});
  CHECK(ps::concat(parts) == whole);
}

TEST_CASE("the sharded client pushes and pulls every shard's slice of one vector", "[parameter_server]") {
  scoped_runtime rt;
  auto servers = ps::sharded::create({.size = 10, .num_shards = 3, .num_workers = 1, .staleness = 1,
                                      .optimizer = {.name = "sgd", .lr = 0.5}});
  REQUIRE(servers);
  CHECK(servers->num_shards() == 3);
  std::vector<float> w(10);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  REQUIRE(servers->init({.weights = w}));
  std::vector<float> g(10);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i + 1);
  std::vector<float> back(10);
  auto got = servers->push_pull(0, 1, g, back);
  REQUIRE(got);
  CHECK(got->version == 1);
  for (std::size_t i = 0; i < 10; ++i) CHECK(back[i] == 0.5f * static_cast<float>(i) - 0.5f);  // i - 0.5 (i + 1)
  // Each shard holds its slice: shard 1 is floats 4..6.
  auto stats = servers->stats();
  REQUIRE(stats);
  CHECK((*stats)[1].shard == 1);
  const auto shard1 = celer::get(servers->servers()[1].task(&ps::server::pull).remote(0, 2));
  CHECK(weights_of(shard1) == std::vector<float>{1.5f, 2.0f, 2.5f});
  auto state = servers->state();
  REQUIRE(state);
  CHECK(state->weights == back);
  CHECK(state->clock == 1);
  // Sizes are checked before anything is sent.
  std::vector<float> wrong(9);
  CHECK(servers->push(0, 2, wrong).error().code() == celer::error_code::invalid_argument);
  CHECK(servers->pull(0, 2, wrong).error().code() == celer::error_code::invalid_argument);
  CHECK(servers->init({.weights = wrong}).error().code() == celer::error_code::invalid_argument);
}

TEST_CASE("parameter servers refuse bad input with errors that say what is wrong", "[parameter_server]") {
  scoped_runtime rt;
  auto s = make({.size = 3, .num_workers = 2, .staleness = 1, .optimizer = {.name = "sgd", .lr = 0.1},
                 .timeout_ms = 300});
  // Before init, a pull waits for it, then says nobody called it.
  const auto early = celer::get(s.task(&ps::server::pull).remote(0, 1));
  CHECK(early.code == static_cast<std::uint8_t>(celer::error_code::deadline_exceeded));
  CHECK_THAT(early.message, Contains("nobody called init"));
  const auto bad_init = celer::get(s.task(&ps::server::init).remote(ps::shard_state{.weights = {1.0f}}));
  CHECK(bad_init.code == static_cast<std::uint8_t>(celer::error_code::invalid_argument));
  CHECK_THAT(bad_init.message, Contains("holds 3 floats"));
  REQUIRE(celer::get(s.task(&ps::server::init).remote(ps::shard_state{.weights = {1, 2, 3}})).code == 0);
  const auto again = celer::get(s.task(&ps::server::init).remote(ps::shard_state{.weights = {1, 2, 3}}));
  CHECK(again.code == static_cast<std::uint8_t>(celer::error_code::failed_precondition));
  CHECK_THAT(again.message, Contains("initialised already"));

  const auto size = push(s, 0, 1, {1.0f, 2.0f});
  CHECK(size.code == static_cast<std::uint8_t>(celer::error_code::invalid_argument));
  CHECK_THAT(size.message, Contains("holds 3 floats") && Contains("has 2"));
  const auto who = push(s, 5, 1, {1, 1, 1});
  CHECK(who.code == static_cast<std::uint8_t>(celer::error_code::invalid_argument));
  CHECK_THAT(who.message, Contains("unknown worker 5") && Contains("workers 0 to 1"));
  const auto order = push(s, 0, 3, {1, 1, 1});
  CHECK(order.code == static_cast<std::uint8_t>(celer::error_code::invalid_argument));
  CHECK_THAT(order.message, Contains("pushed step 3 but its last push was step 0"));
  const auto nan = push(s, 0, 1, {1.0f, std::nanf(""), 1.0f});
  CHECK(nan.code == static_cast<std::uint8_t>(celer::error_code::invalid_argument));
  CHECK_THAT(nan.message, Contains("not finite at 1"));
  CHECK(celer::get(s.task(&ps::server::stats).remote()).version == 0);  // nothing applied
  const auto ahead = celer::get(s.task(&ps::server::pull).remote(0, 4));
  CHECK(ahead.code == static_cast<std::uint8_t>(celer::error_code::invalid_argument));
  CHECK_THAT(ahead.message, Contains("pull for a step from 1 to 1"));

  // Past the bound for longer than timeout_ms: deadline_exceeded naming the slow worker.
  REQUIRE(push(s, 0, 1, {1, 1, 1}).code == 0);
  REQUIRE(push(s, 0, 2, {1, 1, 1}).code == 0);
  const auto stuck = push(s, 0, 3, {1, 1, 1});  // needs worker 1 past step 1
  CHECK(stuck.code == static_cast<std::uint8_t>(celer::error_code::deadline_exceeded));
  CHECK_THAT(stuck.message, Contains("worker 1 has pushed only 0 steps") && Contains("staleness 1"));
  // A retired worker pushes no more.
  REQUIRE(celer::get(s.task(&ps::server::retire).remote(1)).code == 0);
  const auto late = push(s, 1, 1, {1, 1, 1});
  CHECK(late.code == static_cast<std::uint8_t>(celer::error_code::failed_precondition));
  CHECK_THAT(late.message, Contains("worker 1 retired"));

  // The client checks its options before making any server.
  using ec = celer::error_code;
  CHECK(ps::sharded::create({.size = 0}).error().code() == ec::invalid_argument);
  CHECK(ps::sharded::create({.size = 2, .num_shards = 3}).error().code() == ec::invalid_argument);
  CHECK(ps::sharded::create({.size = 8, .staleness = -1}).error().code() == ec::invalid_argument);
  const auto opt = ps::sharded::create({.size = 8, .optimizer = {.name = "adagrad"}});
  CHECK_THAT(opt.error().message(), Contains("sgd, adam or adamw"));
  CHECK(ps::sharded{}.retire(0).error().code() == ec::failed_precondition);
}
