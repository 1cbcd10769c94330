#include "core/request_table.hpp"

#include "config/knobs.hpp"
#include "core/worker_context.hpp"
#include "log.hpp"

#include <algorithm>
#include <type_traits>

namespace celer {

namespace {

/// The messages that answer a core's requests, by request_id.
template <class T>
constexpr bool is_reply_v =
  std::is_same_v<T, protocol::create_actor_reply> || std::is_same_v<T, protocol::store_reply> ||
  std::is_same_v<T, protocol::store_stats_reply> || std::is_same_v<T, protocol::object_location> ||
  std::is_same_v<T, protocol::lookup_actor_reply> || std::is_same_v<T, protocol::resource_reply> ||
  std::is_same_v<T, protocol::placement_explained> ||
  std::is_same_v<T, protocol::placement_group_reply> ||
  std::is_same_v<T, protocol::placement_group_list> || std::is_same_v<T, protocol::status_reply>;

} // namespace

request_table::request_table(transport& net, address self, clock now)
  : net_(net), self_(std::move(self)), now_(std::move(now)) {}

protocol::message request_table::request(const address& to, protocol::message m,
                                         std::uint64_t id) {
  const char* what = protocol::name_of(m);
  auto reply = send_request(to, std::move(m), id);
  return await_reply(reply, id, what);
}

protocol::message request_table::request_again(const address& to, protocol::message m,
                                               std::uint64_t id, std::chrono::milliseconds every) {
  const char* what = protocol::name_of(m);
  const protocol::message again = m;
  auto reply = send_request(to, std::move(m), id);
  const auto limit = std::chrono::milliseconds(knobs().request_timeout_ms);
  const auto deadline = now_() + limit;
  using duration = std::chrono::steady_clock::duration;
  before_wait();
  while (true) {
    const duration left = deadline - now_();
    const duration slice = std::clamp<duration>(left, duration::zero(), every);
    if (reply.wait_for(slice) == std::future_status::ready) return reply.get();
    if (now_() >= deadline) {
      std::lock_guard lock(mutex_);
      requests_.erase(id);
      throw exception(error_code::deadline_exceeded,
                      std::string(what) + ": no reply within " + millis(limit));
    }
    (void)net_.send(to, protocol::message(again));  // the same id: one reply completes it
  }
}

std::future<protocol::message> request_table::send_request(const address& to, protocol::message m,
                                                           std::uint64_t id) {
  std::future<protocol::message> reply;
  {
    std::lock_guard lock(mutex_);
    if (stopped_ && stop_code_) throw exception(*stop_code_, stop_reason_);
    if (stopped_) {
      throw exception(error_code::failed_precondition, "celer is shutting down: " + stop_reason_);
    }
    auto& r = requests_[id];
    r.to = to.id;
    reply = r.reply.get_future();
  }
  const char* what = protocol::name_of(m);
  // Sent without mutex_: a transport that delivers inline may complete it at once.
  if (!net_.send(to, std::move(m))) {
    std::lock_guard lock(mutex_);
    requests_.erase(id);
    throw exception(error_code::unavailable, std::string(what) + ": the peer is unreachable");
  }
  return reply;
}

protocol::message request_table::await_reply(std::future<protocol::message>& reply,
                                             std::uint64_t id, const char* what) {
  const auto limit = std::chrono::milliseconds(knobs().request_timeout_ms);
  const auto deadline = now_() + limit;
  before_wait();
  // One wait of the whole limit on the steady clock; a made-up clock may have passed the
  // deadline already (then the wait is a look).
  while (reply.wait_for(std::max(std::chrono::steady_clock::duration::zero(), deadline - now_())) !=
         std::future_status::ready) {
    if (now_() < deadline) continue;
    std::lock_guard lock(mutex_);
    requests_.erase(id);
    throw exception(error_code::deadline_exceeded,
                    std::string(what) + ": no reply within " + millis(limit));
  }
  return reply.get();  // rethrows the failure set by stop()
}

bool request_table::complete(protocol::message& m) {
  return std::visit(
    [&](auto& msg) {
      using T = std::decay_t<decltype(msg)>;
      if constexpr (is_reply_v<T>) {
        std::lock_guard lock(mutex_);
        auto it = requests_.find(msg.request_id);
        if (it == requests_.end()) return true;  // the requester gave up waiting
        it->second.reply.set_value(std::move(msg));
        requests_.erase(it);
        return true;
      } else {
        return false;
      }
    },
    m);
}

void request_table::stop(const std::string& reason, std::optional<error_code> code) {
  std::lock_guard lock(mutex_);
  if (!stopped_) {
    stopped_ = true;
    stop_reason_ = reason;
    stop_code_ = code;
  }
  for (auto& [id, p] : requests_) {
    p.reply.set_exception(std::make_exception_ptr(
      stop_code_ ? exception(*stop_code_, stop_reason_)
                 : exception(error_code::cancelled, "celer is shutting down: " + stop_reason_)));
  }
  requests_.clear();
}

void request_table::fail_sent_to(const address& to, error_code code, const std::string& reason) {
  std::lock_guard lock(mutex_);
  for (auto it = requests_.begin(); it != requests_.end();) {
    if (it->second.to == to.id) {
      it->second.reply.set_exception(std::make_exception_ptr(exception(code, reason)));
      it = requests_.erase(it);
    } else {
      ++it;
    }
  }
}

std::size_t request_table::pending() const {
  std::lock_guard lock(mutex_);
  return requests_.size();
}

} // namespace celer
