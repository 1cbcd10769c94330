// A process's mailboxes for celer::peer (peer_mailbox.hpp).
#include "core/peer_mailbox.hpp"

#include "core/worker_context.hpp"

#include <memory>

namespace celer {

bool peer_mailbox::deposit(const std::string& box, std::uint64_t seq, std::string payload) {
  auto owned = std::make_shared<std::string>(std::move(payload));
  const void* data = owned->data();
  const std::size_t size = owned->size();
  return deposit(box, seq, bytes(data, size, std::shared_ptr<const void>(owned, data)));
}

bool peer_mailbox::deposit(const std::string& box, std::uint64_t seq, bytes payload) {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return false;
    auto& held = boxes_[box];
    auto it = held.find(seq);
    const std::size_t replaced = it == held.end() ? 0 : it->second.size();
    if (bytes_ - replaced + payload.size() > max_bytes_) {
      ++dropped_;
      if (held.empty()) boxes_.erase(box);
      return false;
    }
    bytes_ = bytes_ - replaced + payload.size();
    held.insert_or_assign(seq, std::move(payload));
  }
  arrived_.notify_all();
  return true;
}

expected<bytes> peer_mailbox::take(const std::string& box, std::uint64_t seq,
                                   std::optional<clock::time_point> deadline) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (stopped_) return *stopped_;
    if (auto b = boxes_.find(box); b != boxes_.end()) {
      if (auto m = b->second.find(seq); m != b->second.end()) {
        bytes taken = std::move(m->second);
        bytes_ -= taken.size();
        b->second.erase(m);
        if (b->second.empty()) boxes_.erase(b);
        return taken;
      }
    }
    before_wait();
    if (!deadline) {
      arrived_.wait(lock);
    } else if (arrived_.wait_until(lock, *deadline) == std::cv_status::timeout && clock::now() >= *deadline) {
      std::string why = "no message " + std::to_string(seq) + " of mailbox " + box + " arrived in time";
      if (dropped_ > 0) {
        why += " (" + std::to_string(dropped_) + " messages were dropped: the mailboxes held their bound of " +
               std::to_string(max_bytes_) + " bytes)";
      }
      return error(error_code::deadline_exceeded, why);
    }
  }
}

void peer_mailbox::close(const std::string& box) {
  std::lock_guard lock(mutex_);
  auto b = boxes_.find(box);
  if (b == boxes_.end()) return;
  for (const auto& [seq, payload] : b->second) bytes_ -= payload.size();
  boxes_.erase(b);
}

void peer_mailbox::stop(error_code code, const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!stopped_) stopped_ = error(code, reason);
    boxes_.clear();
    bytes_ = 0;
  }
  arrived_.notify_all();
}

std::size_t peer_mailbox::bytes_held() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

} // namespace celer
