#pragma once
// A transport that records what components send instead of delivering it, and a worker
// launcher that hands out addresses without starting anything: they let tests drive a
// component's logic message by message, with no threads and no timing. Sends and take()
// may run on different threads (a test takes what a thread blocked in a get sent); the
// other members are for the test's own thread.

#include "node/worker_pool.hpp"
#include "transport/transport.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace celer::fakes {

class recording_transport final : public transport {
public:
  bool send(const address& to, protocol::message&& m) override {
    if (std::find(unreachable.begin(), unreachable.end(), to) != unreachable.end()) return false;
    if (!answer) {
      std::lock_guard lock(mutex_);
      sent.emplace_back(to, std::move(m));
      return true;
    }
    {
      std::lock_guard lock(mutex_);
      sent.emplace_back(to, m);
    }
    answer(to, m);
    return true;
  }
  /// Messages of type T sent so far (and forgets them).
  template <class T>
  std::vector<std::pair<address, T>> take() {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<address, T>> out;
    std::vector<std::pair<address, protocol::message>> rest;
    for (auto& [to, m] : sent) {
      if (auto* t = std::get_if<T>(&m)) {
        out.emplace_back(to, std::move(*t));
      } else {
        rest.emplace_back(to, std::move(m));
      }
    }
    sent = std::move(rest);
    return out;
  }
  void forget(const std::string& endpoint) override { forgotten.push_back(endpoint); }
  /// With `enter` set, who is let into which shared namespace (transport::may_enter, the
  /// head's namespace grants); every job is let in everywhere otherwise. host_namespace()
  /// records the namespaces hosted.
  [[nodiscard]] bool may_enter(const job_id& job, const std::string& name_space) const override {
    return !enter || enter(job, name_space);
  }
  void host_namespace(const std::string& name_space) override { hosted.push_back(name_space); }
  std::function<bool(const job_id&, const std::string&)> enter;
  std::vector<std::string> hosted;
  std::vector<std::pair<address, protocol::message>> sent;
  /// The endpoints forget() was called with.
  std::vector<std::string> forgotten;
  /// Sends to these fail (the peer is unreachable) and are not recorded.
  std::vector<address> unreachable;
  /// Called with each message once it is recorded, on the sender's thread: a test answers
  /// a request from here, before the sender waits for the reply.
  std::function<void(const address&, const protocol::message&)> answer;

private:
  std::mutex mutex_;
};

class fake_launcher final : public worker_launcher {
public:
  /// Workers start ready (like threads) unless `as_processes`: then they wait for
  /// worker_ready, like processes.
  launched launch(const worker_id& id, const protocol::task_spec&,
                  const std::vector<int>& gpus) override {
    launched_ids.push_back(id);
    launched_gpus.push_back(gpus);
    return {address{id, {}}, !as_processes};
  }
  void terminate(const worker_id& id, const address&, const actor_id&) override {
    terminated.push_back(id);
  }
  [[nodiscard]] std::optional<int> pid_of(const worker_id& id) const override {
    auto it = pids.find(id);
    if (it == pids.end()) return std::nullopt;
    return it->second;
  }
  bool as_processes = false;
  /// The process each worker is said to be (pid_of; none: a thread).
  std::map<worker_id, int> pids;
  std::vector<worker_id> launched_ids;
  /// The GPUs each launched worker was given to see.
  std::vector<std::vector<int>> launched_gpus;
  std::vector<worker_id> terminated;
};

} // namespace celer::fakes
