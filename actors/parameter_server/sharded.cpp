// The sharded client of the parameter servers (<celer/actors/parameter_server.hpp>): one flat
// vector over k server actors, every call sent to all shards before any reply is awaited.
#include <celer/actors/parameter_server.hpp>

#include <celer/celer.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>

namespace celer::parameter_server {
namespace {

error from_reply(std::uint8_t code, const std::string& message) {
  return error(static_cast<error_code>(code), message);
}

/// Runs `body` (which awaits server replies), turning the runtime's exceptions (a server
/// actor that died, the runtime shut down) into errors.
template <class F>
auto guarded(const char* what, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const celer::exception& e) {
    return error(error_code::unavailable, std::string("parameter servers: ") + what + ": " + e.what());
  } catch (const std::exception& e) {
    return error(error_code::unavailable, std::string("parameter servers: ") + what + ": " + e.what());
  }
}

error no_servers() {
  return error(error_code::failed_precondition,
               "parameter servers: this client has no servers (make one with sharded::create)");
}

} // namespace

std::pair<std::size_t, std::size_t> shard_range(std::size_t size, int num_shards, int shard) {
  const auto k = static_cast<std::size_t>(std::max(1, num_shards));
  const auto i = static_cast<std::size_t>(std::clamp(shard, 0, static_cast<int>(k) - 1));
  const std::size_t base = size / k, extra = size % k;
  const std::size_t begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

std::vector<std::vector<float>> split(std::span<const float> whole, int num_shards) {
  std::vector<std::vector<float>> out;
  for (int i = 0; i < std::max(1, num_shards); ++i) {
    const auto [b, e] = shard_range(whole.size(), num_shards, i);
    out.emplace_back(whole.begin() + static_cast<std::ptrdiff_t>(b), whole.begin() + static_cast<std::ptrdiff_t>(e));
  }
  return out;
}

std::vector<float> concat(const std::vector<std::vector<float>>& slices) {
  std::vector<float> out;
  std::size_t n = 0;
  for (const auto& s : slices) n += s.size();
  out.reserve(n);
  for (const auto& s : slices) out.insert(out.end(), s.begin(), s.end());
  return out;
}

expected<sharded> sharded::create(const sharded_options& o) {
  auto bad = [](std::string what) { return error(error_code::invalid_argument, "parameter servers: " + std::move(what)); };
  if (o.num_shards < 1) return bad("num_shards must be at least 1");
  if (o.size == 0) return bad("size must be above 0");
  if (o.size < static_cast<std::uint64_t>(o.num_shards))
    return bad("cannot split " + std::to_string(o.size) + " floats over " + std::to_string(o.num_shards) + " shards");
  if (o.num_workers < 1) return bad("num_workers must be at least 1");
  if (o.staleness < 0) return bad("staleness must be at least 0");
  if (o.timeout.count() <= 0) return bad("timeout must be above 0");
  if (o.cpus_per_server < 0) return bad("cpus_per_server must be at least 0");
  if (auto ok = validate(o.optimizer); !ok) return bad(ok.error().message());
  sharded out;
  out.size_ = o.size;
  return guarded("creating the servers", [&]() -> expected<sharded> {
    for (int i = 0; i < o.num_shards; ++i) {
      const auto [b, e] = shard_range(o.size, o.num_shards, i);
      const server_options so{.shard = i, .num_shards = o.num_shards, .size = e - b, .num_workers = o.num_workers,
                              .staleness = o.staleness, .optimizer = o.optimizer, .timeout_ms = o.timeout.count()};
      // Calls that wait at the bound hold a thread each (at most one per worker), and the
      // pushes that release them, the driver's retire and stats need more.
      out.servers_.push_back(celer::actor(make_server)
                               .options({.num_cpus = o.cpus_per_server, .max_concurrency = o.num_workers + 4})
                               .remote(so));
    }
    return out;
  });
}

expected<void> sharded::init(const shard_state& whole) {
  auto sized = [&](const std::vector<float>& v) { return v.empty() || v.size() == size_; };
  if (whole.weights.size() != size_ || !sized(whole.first) || !sized(whole.second)) {
    return error(error_code::invalid_argument, "parameter servers hold " + std::to_string(size_) +
                                                 " floats; init was given " + std::to_string(whole.weights.size()) +
                                                 " weights, " + std::to_string(whole.first.size()) + " and " +
                                                 std::to_string(whole.second.size()) + " of optimiser state");
  }
  if (servers_.empty()) return no_servers();
  return guarded("init", [&]() -> expected<void> {
    const int k = num_shards();
    const auto w = split(whole.weights, k);
    const auto f = whole.first.empty() ? std::vector<std::vector<float>>(static_cast<std::size_t>(k)) : split(whole.first, k);
    const auto s = whole.second.empty() ? std::vector<std::vector<float>>(static_cast<std::size_t>(k)) : split(whole.second, k);
    std::vector<object_ref<reply>> calls;
    for (int i = 0; i < k; ++i) {
      const auto u = static_cast<std::size_t>(i);
      calls.push_back(servers_[u].task(&server::init).remote(shard_state{.weights = w[u], .first = f[u], .second = s[u],
                                                                         .optimizer_steps = whole.optimizer_steps,
                                                                         .clock = whole.clock}));
    }
    for (auto& c : calls) {
      const auto r = celer::get(c);
      if (r.code != 0) return from_reply(r.code, r.message);
    }
    return {};
  });
}

namespace {

/// Sends one call per shard (`send(i, begin, end)` returns its ref), then awaits them all;
/// `take(i, begin, end, reply)` reads each good reply. The first error reply wins, once
/// every reply is in. A dead server throws out of celer::get (`guarded` catches it).
template <class Send, class Take>
expected<exchange_info> each_shard(const std::vector<actor_handle<server>>& servers, std::size_t size, Send&& send,
                                   Take&& take) {
  const int k = static_cast<int>(servers.size());
  if (k == 0) return no_servers();
  std::vector<object_ref<reply>> calls;
  calls.reserve(servers.size());
  for (int i = 0; i < k; ++i) {
    const auto [b, e] = shard_range(size, k, i);
    calls.push_back(send(i, b, e));
  }
  exchange_info info{.version = std::numeric_limits<std::int64_t>::max(),
                     .slowest_clock = std::numeric_limits<std::int64_t>::max()};
  std::optional<error> first;
  for (int i = 0; i < k; ++i) {
    const auto r = celer::get(calls[static_cast<std::size_t>(i)]);
    if (r.code != 0) {
      if (!first) first = from_reply(r.code, r.message);
      continue;
    }
    const auto [b, e] = shard_range(size, k, i);
    if (auto ok = take(i, b, e, r); !ok && !first) first = ok.error();
    info.version = std::min(info.version, r.version);
    info.slowest_clock = std::min(info.slowest_clock, r.slowest_clock);
    info.waited_seconds = std::max(info.waited_seconds, r.waited_seconds);
  }
  if (first) return *first;
  return info;
}

expected<void> take_weights(std::span<float> weights, std::size_t b, std::size_t e, const reply& r) {
  if (r.weights.size() != e - b) {
    return error(error_code::internal, "a parameter server sent " + std::to_string(r.weights.size()) +
                                         " weights for a shard of " + std::to_string(e - b));
  }
  if (e > b) std::memcpy(weights.data() + b, r.weights.data(), (e - b) * sizeof(float));
  return {};
}

} // namespace

expected<exchange_info> sharded::push(int worker, std::int64_t step, std::span<const float> gradient) {
  if (gradient.size() != size_) {
    return error(error_code::invalid_argument, "parameter servers hold " + std::to_string(size_) +
                                                 " floats; worker " + std::to_string(worker) + "'s gradient has " +
                                                 std::to_string(gradient.size()));
  }
  return guarded("push", [&] {
    return each_shard(
      servers_, size_,
      [&](int i, std::size_t b, std::size_t e) {
        return servers_[static_cast<std::size_t>(i)].task(&server::push).remote(
          worker, step, celer::array<float>(gradient.data() + b, e - b));
      },
      [](int, std::size_t, std::size_t, const reply&) -> expected<void> { return {}; });
  });
}

expected<exchange_info> sharded::pull(int worker, std::int64_t step, std::span<float> weights) {
  if (weights.size() != size_) {
    return error(error_code::invalid_argument, "parameter servers hold " + std::to_string(size_) +
                                                 " floats; the buffer to pull into has " +
                                                 std::to_string(weights.size()));
  }
  return guarded("pull", [&] {
    return each_shard(
      servers_, size_,
      [&](int i, std::size_t, std::size_t) {
        return servers_[static_cast<std::size_t>(i)].task(&server::pull).remote(worker, step);
      },
      [&](int, std::size_t b, std::size_t e, const reply& r) { return take_weights(weights, b, e, r); });
  });
}

expected<exchange_info> sharded::push_pull(int worker, std::int64_t step, std::span<const float> gradient,
                                           std::span<float> weights) {
  if (gradient.size() != size_ || weights.size() != size_) {
    return error(error_code::invalid_argument, "parameter servers hold " + std::to_string(size_) +
                                                 " floats; worker " + std::to_string(worker) + "'s gradient has " +
                                                 std::to_string(gradient.size()) + " and its weights " +
                                                 std::to_string(weights.size()));
  }
  return guarded("push_pull", [&] {
    // Every slice is copied into its call before any reply overwrites `weights` (which may
    // be `gradient`).
    return each_shard(
      servers_, size_,
      [&](int i, std::size_t b, std::size_t e) {
        return servers_[static_cast<std::size_t>(i)].task(&server::push_pull).remote(
          worker, step, celer::array<float>(gradient.data() + b, e - b));
      },
      [&](int, std::size_t b, std::size_t e, const reply& r) { return take_weights(weights, b, e, r); });
  });
}

expected<void> sharded::retire(int worker) {
  return guarded("retire", [&]() -> expected<void> {
    auto got = each_shard(
      servers_, size_,
      [&](int i, std::size_t, std::size_t) {
        return servers_[static_cast<std::size_t>(i)].task(&server::retire).remote(worker);
      },
      [](int, std::size_t, std::size_t, const reply&) -> expected<void> { return {}; });
    if (!got) return got.error();
    return {};
  });
}

expected<shard_state> sharded::state() {
  if (servers_.empty()) return no_servers();
  return guarded("state", [&]() -> expected<shard_state> {
    std::vector<object_ref<state_reply>> calls;
    for (const auto& s : servers_) calls.push_back(s.task(&server::state).remote());
    shard_state out;
    out.clock = std::numeric_limits<std::int64_t>::max();
    for (std::size_t i = 0; i < calls.size(); ++i) {
      auto r = celer::get(calls[i]);
      if (r.code != 0) return from_reply(r.code, r.message);
      out.weights.insert(out.weights.end(), r.state.weights.begin(), r.state.weights.end());
      out.first.insert(out.first.end(), r.state.first.begin(), r.state.first.end());
      out.second.insert(out.second.end(), r.state.second.begin(), r.state.second.end());
      out.optimizer_steps = std::max(out.optimizer_steps, r.state.optimizer_steps);
      out.clock = std::min(out.clock, r.state.clock);
    }
    return out;
  });
}

expected<std::vector<server_stats>> sharded::stats() {
  if (servers_.empty()) return no_servers();
  return guarded("stats", [&]() -> expected<std::vector<server_stats>> {
    std::vector<object_ref<server_stats>> calls;
    for (const auto& s : servers_) calls.push_back(s.task(&server::stats).remote());
    std::vector<server_stats> out;
    for (auto& c : calls) out.push_back(celer::get(c));
    return out;
  });
}

void sharded::stop() {
  for (const auto& s : servers_) {
    try {
      celer::kill(s);
    } catch (const std::exception&) {  // the runtime is gone already: so are the actors
    }
  }
  servers_.clear();
}

} // namespace celer::parameter_server
