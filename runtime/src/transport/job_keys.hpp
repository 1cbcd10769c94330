#pragma once
// Who a job key belongs to, for a zmq_transport's ZAP handler (zmq_transport_keys.cpp).
//
// A process accepts a job's CURVE key once it knows the job: the head when the job's driver
// registers it (or the head starts it), a node once the head has said whose the key is.
// job_key_table holds what it knows; key_lookups holds the handshakes that wait meanwhile
// for the head's answer, each answered when it comes, or refused when it does not come in
// time.
#include <celer/ids.hpp>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace celer {

/// The job keys this process accepts: public key bytes -> job. Any thread (register_job
/// runs on components' threads, the ZAP handler on the receiver's).
class job_key_table {
public:
  /// Keys a forgetful table (a node's) holds at most: past it, it forgets them all and asks
  /// the head again for each. The head's, which answers, keeps every job until it ends.
  static constexpr std::size_t max_forgetful_keys = 65536;

  explicit job_key_table(bool forgetful) : forgetful_(forgetful) {}

  void add(const std::string& key, const job_id& job);
  void erase(const std::string& key);
  [[nodiscard]] std::optional<job_id> find(const std::string& key) const;
  /// The key held for `job` (a job's process: the key of a job it met, which it cannot
  /// derive), if any.
  [[nodiscard]] std::optional<std::string> key_of(const job_id& job) const;
  /// The jobs whose keys are held now.
  [[nodiscard]] std::vector<job_id> jobs() const;
  [[nodiscard]] std::size_t size() const;

private:
  const bool forgetful_;
  mutable std::mutex mutex_;  // guards keys_
  std::unordered_map<std::string, job_id> keys_;
};

/// A handshake waiting for the ZAP handler's answer.
struct zap_request {
  std::vector<std::string> envelope;  // routing frames up to and including the empty one
  std::string request_id;
  std::chrono::steady_clock::time_point since;
};

/// Handshakes presenting a job key this process does not know, waiting for the head to say
/// whose it is. The receiver thread only.
class key_lookups {
public:
  /// The head answers within this or the handshakes are refused.
  static constexpr std::chrono::milliseconds timeout{1000};
  /// Handshakes waiting at most; more are refused at once.
  static constexpr std::size_t max_waiting = 256;

  /// max_waiting wait: refuse the next at once.
  [[nodiscard]] bool full() const noexcept { return waiting_ >= max_waiting; }
  /// `r` waits for `key`'s answer (not full()). True when it is the first for its key: ask
  /// the head; false when another with that key asked already.
  [[nodiscard]] bool wait(const std::string& key, zap_request r);
  /// The handshakes that wait for `key` (the head answered), no longer waiting.
  [[nodiscard]] std::vector<zap_request> answered(std::string_view key);
  /// The handshakes whose key's first lookup began `timeout` before `now` or earlier, no
  /// longer waiting.
  [[nodiscard]] std::vector<zap_request> expired(std::chrono::steady_clock::time_point now);
  [[nodiscard]] bool empty() const noexcept { return by_key_.empty(); }
  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_; }

private:
  std::unordered_map<std::string, std::vector<zap_request>> by_key_;
  std::size_t waiting_ = 0;
};

} // namespace celer
