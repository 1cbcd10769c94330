#pragma once
// Where a streaming generator's values go as the worker runs it (worker.cpp): each to the
// owner, then a wait while the consumer is a window behind.

#include "worker/worker.hpp"

#include "log.hpp"

#include <cstdint>
#include <string>

namespace celer {

class worker::stream_out final : public detail::item_sink {
public:
  stream_out(worker& host, const protocol::task_spec& spec, running_calls::slot* slot)
    : host_(host), spec_(spec), slot_(slot) {}

  bool item(std::string packed) override {
    if (slot_->cancelled.load(std::memory_order_relaxed)) return false;
    protocol::generator_item out;
    out.task = spec_.id;
    out.attempt = spec_.attempt;
    out.index = produced_;
    out.value = host_.keep_value(spec_, protocol::task_spec::generator_item_id(spec_.id, produced_),
                                 std::move(packed));
    out.worker = host_.cfg_.self;
    ++produced_;
    if (!out.value.ok) {
      // A retry finds a value its last attempt kept in this node's store: its owner has it
      // (or learns at the end that it was lost), so it is not sent again.
      const bool kept_before = spec_.attempt > 1 && out.value.fail.code == error_code::already_exists;
      // Else the store refused it (full): the stream ends here, with that error.
      if (!kept_before) {
        throw exception(out.value.fail.code, "value " + std::to_string(produced_ - 1) + " of " + spec_.function +
                                               " could not be kept: " + out.value.fail.message);
      }
    } else if (!host_.net_.send(spec_.owner, std::move(out))) {
      CELER_LOG(info, "worker", "the owner of generator " + spec_.function + " is gone; it stops");
      return false;
    }
    if (spec_.generator <= 0) return true;
    const auto window = static_cast<std::uint64_t>(spec_.generator);
    if (host_.calls_.has_room(slot_, produced_, window)) return true;
    // Ahead of its consumer by its window: it waits as a get does (its CPUs lent to the
    // node, the tasks queued behind it given back, another thread receiving for it).
    auto* ctx = current_worker_context();
    if (ctx != nullptr) {
      ctx->blocked = true;
      (void)host_.net_.send(ctx->node, protocol::worker_blocked{ctx->worker});
      if (ctx->on_block) ctx->on_block(true);
    }
    before_wait();
    const bool go_on = host_.calls_.wait_room(slot_, produced_, window);
    if (ctx != nullptr) {
      if (ctx->on_block) ctx->on_block(false);
      (void)host_.net_.send(ctx->node, protocol::worker_unblocked{ctx->worker});
    }
    return go_on;
  }

private:
  worker& host_;
  const protocol::task_spec& spec_;
  running_calls::slot* slot_;
  std::uint64_t produced_ = 0;
};

} // namespace celer
