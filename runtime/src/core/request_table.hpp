#pragma once
// A core's requests awaiting their replies: it sends a request with a fresh request id,
// keeps a promise for it, and completes the promise when the reply with that id arrives
// (or fails it when the peer is unreachable, no reply comes within request_timeout_ms, or
// the core stops). The head client and the store client send their requests through the
// one table of their core, so that every reply reaches its requester by id alone.
//
//   request_table requests(net, self, [] { return std::chrono::steady_clock::now(); });
//   auto st = requests.ask<protocol::status_reply>(head, protocol::status_query{});
//   // on the core's actor, for each message: if (requests.complete(m)) return;
//
// Threads: user threads send and wait; `complete` runs where the core handles its messages.
// mutex_ guards requests_ and the stop state; no lock is held while sending or waiting.

#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>

namespace celer {

class request_table {
public:
  /// The time replies are awaited by (tests pass a made-up one).
  using clock = std::function<std::chrono::steady_clock::time_point()>;

  /// Replies come back to `self`.
  request_table(transport& net, address self, clock now);
  request_table(const request_table&) = delete;
  request_table& operator=(const request_table&) = delete;

  [[nodiscard]] const address& self() const noexcept { return self_; }
  [[nodiscard]] std::chrono::steady_clock::time_point now() const { return now_(); }
  /// A request id never used by this table before.
  [[nodiscard]] std::uint64_t next_id() noexcept {
    return counter_.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  /// Sends a query (a message with request_id and reply_to, which it fills in) and waits
  /// for its reply. Throws as `request` does.
  template <class Reply, class Query>
  Reply ask(const address& to, Query msg) {
    msg.request_id = next_id();
    msg.reply_to = self_;
    const auto id = msg.request_id;
    return std::get<Reply>(request(to, std::move(msg), id));
  }
  /// As `ask`, for a request that is safe to repeat (every request to the head): sent again
  /// every `every` while no reply has come, so that one lost with a head that died and
  /// came back is not waited for until request_timeout_ms.
  template <class Reply, class Query>
  Reply ask_again(const address& to, Query msg, std::chrono::milliseconds every = resend_every) {
    msg.request_id = next_id();
    msg.reply_to = self_;
    const auto id = msg.request_id;
    return std::get<Reply>(request_again(to, std::move(msg), id, every));
  }
  static constexpr std::chrono::milliseconds resend_every{1000};
  protocol::message request_again(const address& to, protocol::message m, std::uint64_t id,
                                  std::chrono::milliseconds every = resend_every);
  /// Sends `m`, whose request id is `id`, and waits for its reply. Throws celer::exception:
  /// unavailable when `to` is unreachable, deadline_exceeded after request_timeout_ms, and
  /// the stop's error once the table is stopped.
  protocol::message request(const address& to, protocol::message m, std::uint64_t id);
  /// The first half of `request`: sends `m` and returns the reply to come, so that several
  /// requests can be on their way at once.
  std::future<protocol::message> send_request(const address& to, protocol::message m,
                                              std::uint64_t id);
  /// The second half: waits (request_timeout_ms at most, from now) for the reply to
  /// request `id`; `what` names the request in the error.
  protocol::message await_reply(std::future<protocol::message>& reply, std::uint64_t id,
                                const char* what);

  /// If `m` is a reply to a request (any reply type, whatever its id), completes the
  /// request it answers (a reply nobody waits for any more is dropped) and returns true;
  /// returns false for every other message.
  bool complete(protocol::message& m);

  /// Fails every request waiting now, and every later one, with `reason`: as `code` when
  /// given (the cluster is gone), else as cancelled (waiting) and failed_precondition
  /// (later). The first stop's reason stands.
  void stop(const std::string& reason, std::optional<error_code> code = std::nullopt);

  /// Fails the requests waiting now for a reply from `to` (by its id) with `code` and
  /// `reason`: the peer is known to be gone, and its replies will never come.
  void fail_sent_to(const address& to, error_code code, const std::string& reason);

  /// Requests sent and not yet answered (tests).
  [[nodiscard]] std::size_t pending() const;

private:
  transport& net_;
  const address self_;
  const clock now_;
  std::atomic<std::uint64_t> counter_{0};

  mutable std::mutex mutex_;
  bool stopped_ = false;
  std::string stop_reason_;
  std::optional<error_code> stop_code_;
  struct pending_request {
    std::promise<protocol::message> reply;
    /// Who was asked (the id of its address: no allocation per request).
    unique_id to;
  };
  std::unordered_map<std::uint64_t, pending_request> requests_;
};

} // namespace celer
