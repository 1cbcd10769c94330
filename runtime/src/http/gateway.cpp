// The HTTP server's way to the head (gateway.hpp).
#include "http/gateway.hpp"

#include <variant>

namespace celer::http {

head_gateway::head_gateway(transport& net, address self, address head)
  : net_(net), self_(std::move(self)), head_(std::move(head)) {}

void head_gateway::handle(protocol::message& m) {
  if (auto* g = std::get_if<protocol::placement_group_reply>(&m)) {
    {
      std::lock_guard lock(m_);
      const auto it = groups_waiting_.find(g->request_id);
      if (it == groups_waiting_.end()) return;
      it->second = std::move(*g);
    }
    cv_.notify_all();
    return;
  }
  auto* r = std::get_if<protocol::status_reply>(&m);
  if (r == nullptr) return;
  {
    std::lock_guard lock(m_);
    const auto it = waiting_.find(r->request_id);
    if (it == waiting_.end()) return;  // asked too long ago: the asker gave up
    it->second = std::move(*r);
  }
  cv_.notify_all();
}

expected<protocol::status_reply> head_gateway::status(std::chrono::milliseconds timeout) {
  std::uint64_t id = 0;
  {
    std::lock_guard lock(m_);
    id = next_++;
    waiting_.emplace(id, std::nullopt);
  }
  protocol::message q = protocol::status_query{.request_id = id, .reply_to = self_};
  std::unique_lock lock(m_);
  bool sent = false;
  {
    lock.unlock();
    sent = net_.send(head_, std::move(q));
    lock.lock();
  }
  if (sent) cv_.wait_for(lock, timeout, [&] { return waiting_.at(id).has_value(); });
  auto got = std::move(waiting_.at(id));
  waiting_.erase(id);
  if (!got) return error(error_code::unavailable, "the head did not answer within " + std::to_string(timeout.count()) + " ms");
  return std::move(*got);
}

bool head_gateway::kill_actor(const actor_id& actor, bool no_restart, const std::string& why) {
  return net_.send(head_, protocol::kill_actor{actor, why, {}, no_restart});
}

expected<void> head_gateway::create_group(protocol::create_placement_group g, std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_);
  const std::uint64_t id = next_++;
  groups_waiting_.emplace(id, std::nullopt);
  g.request_id = id;
  g.reply_to = self_;
  lock.unlock();
  const bool sent = net_.send(head_, std::move(g));
  lock.lock();
  if (sent) cv_.wait_for(lock, timeout, [&] { return groups_waiting_.at(id).has_value(); });
  auto got = std::move(groups_waiting_.at(id));
  groups_waiting_.erase(id);
  if (!got) return error(error_code::unavailable, "the head did not answer within " + std::to_string(timeout.count()) + " ms");
  if (!got->ok) return error(got->fail.code, got->fail.message);
  return {};
}

} // namespace celer::http
