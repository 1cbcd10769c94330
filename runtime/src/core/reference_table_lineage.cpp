// The reference table's lineage (reference_table.hpp): what a finished task leaves behind
// so that its stored output can be made again, the objects lost with a node (rebuilt from
// their lineage, or failed with why not), and the tasks that fail.
#include "core/reference_table.hpp"

#include "log.hpp"

#include <algorithm>

namespace celer {

void reference_table::set_rebuilder(rebuilder r) {
  std::lock_guard lock(mutex_);
  lineage_.set_rebuilder(std::move(r));
}

void reference_table::finish_task(const task_id& task,
                                  std::vector<protocol::object_payload>& returns, made_by made) {
  std::lock_guard lock(mutex_);
  bool args_kept = false;
  const auto several = several_returns_.find(task);
  if (several == several_returns_.end()) {
    if (!returns.empty() && returns.front().ok && returns.front().stored) {
      // Only a stored output can be lost (an inline one lives and dies with this process).
      auto it = objects_.find(returns.front().id);
      if (it != objects_.end() && !it->second.ready) args_kept = keep_lineage(it->second, std::move(made));
    }
  } else {
    fill_missing_returns(task, several->second, returns);
    several_returns_.erase(several);
    for (auto& v : returns) {
      // Several outputs share one run: none is made again on its own (no lineage).
      if (!v.ok || !v.stored) continue;
      auto it = objects_.find(v.id);
      if (it == objects_.end() || it->second.ready) continue;
      made.spec.reset();
      if (!made.actor_method) made.why_not = "its task " + made.function +
                     " has several returns, and those are not made again (return one value, "
                     "or durable=true to keep the outputs on disk)";
      (void)keep_lineage(it->second, made);
    }
  }
  if (!args_kept) release_args(task);
  for (auto& v : returns) fill_locked(std::move(v));
}

void reference_table::fill_missing_returns(const task_id& task, std::uint32_t count,
                                           std::vector<protocol::object_payload>& returns) {
  if (returns.size() >= count) return;
  protocol::failure_info why;
  if (!returns.empty() && !returns.front().ok) {
    why = returns.front().fail;  // the call failed: every return says so
  } else {
    why = protocol::failure_info::make(detail::failure_kind::invalid_call, error_code::internal,
                                       "the call answered " + std::to_string(returns.size()) +
                                         " of its " + std::to_string(count) + " returns");
  }
  for (std::uint32_t i = 0; i < count; ++i) {
    const object_id id = protocol::task_spec::return_id_of(task, i);
    if (std::any_of(returns.begin(), returns.end(), [&](const auto& v) { return v.id == id; })) continue;
    protocol::object_payload v;
    v.id = id;
    v.fail = why;
    returns.push_back(std::move(v));
  }
}

void reference_table::finish_task(const task_id& task,
                                  std::vector<protocol::object_payload>& returns) {
  finish_task(task, returns, made_by{});
}

bool reference_table::keep_lineage(object_entry& e, made_by made) {
  if (e.made) drop_lineage(e);  // a rebuilt output's new lineage replaces the old one
  auto o = std::make_unique<origin>();
  o->function = std::move(made.function);
  o->actor_method = made.actor_method;
  o->why_not = std::move(made.why_not);
  if (made.spec && made.retries_left == 0) {
    o->why_not = "its task " + o->function +
                 " has no retries left (max_retries is 0 or used up: give it max_retries, or "
                 "durable=true to keep the output on disk)";
  } else if (made.spec) {
    std::uint32_t depth = 1;
    std::size_t bytes = sizeof(protocol::task_spec) + o->function.size();
    for (const auto& a : made.spec->args) {
      bytes += sizeof(a) + a.value.size();
      if (!a.is_ref || a.owner != self_) continue;
      auto arg = objects_.find(a.ref);
      if (arg != objects_.end() && arg->second.made && arg->second.made->spec) {
        depth = std::max(depth, arg->second.made->depth + 1);
      }
    }
    if (auto why_not = lineage_.admit(depth, bytes); !why_not.empty()) {
      o->why_not = std::move(why_not);
    } else {
      o->spec = std::move(made.spec);
      o->retries_left = made.retries_left;
      o->retry_exceptions = made.retry_exceptions;
      o->depth = depth;
      o->bytes = bytes;
    }
  }
  const bool kept = o->spec.has_value();
  e.made = std::move(o);
  return kept;
}

void reference_table::drop_lineage(object_entry& e) {
  if (!e.made || !e.made->spec) return;
  const task_id task = e.made->spec->id;
  lineage_.drop(e.made->bytes);
  e.made->spec.reset();
  e.made->why_not = "its lineage was dropped";
  release_args(task);
}

void reference_table::start_rebuild(const object_id& id, object_entry& e, const std::string& why) {
  rebuild r;
  r.spec = std::move(*e.made->spec);
  r.retries_left = e.made->retries_left;
  r.retry_exceptions = e.made->retry_exceptions;
  r.why = why;
  // The task's arguments stay held: the run that makes the output again releases them (or
  // keeps them as its lineage).
  const std::size_t bytes = e.made->bytes;
  e.made->spec.reset();
  e.made->why_not = "it was lost again while it was being made again";
  e.ready = false;
  e.dormant = false;
  e.value.reset();
  e.value.edit().id = id;
  CELER_LOG(warn, "core", "object " + id.hex() + " (the output of " + r.spec.function +
                            ") was lost: " + why + "; running its task again");
  lineage_.queue_rebuild(std::move(r), bytes);
}

void reference_table::run_rebuilds() {
  lineage_ledger::batch b;
  {
    std::lock_guard lock(mutex_);
    b = lineage_.take();
  }
  if (!b.work.empty() && b.to) b.to(std::move(b.work));
}

protocol::failure_info reference_table::lost_failure(const object_id& id, const object_entry& e,
                                                     const std::string& node,
                                                     const std::string& reason) const {
  std::string what, why, function;
  if (e.put) {
    what = "it was put by this process";
    why = "a put object is not made again (put it with durable=true to keep it on disk)";
    function = "celer::put";
  } else if (e.made && e.made->actor_method) {
    what = "it was the result of a call to " + e.made->function;
    why = e.made->why_not;
    function = e.made->function;
  } else if (e.made) {
    what = "it was the output of task " + e.made->function;
    why = e.made->why_not;
    function = e.made->function;
  } else {
    what = "it was a task's output";
    why = "nothing recorded how to make it";
  }
  return protocol::failure_info::make(
    detail::failure_kind::object_lost, error_code::data_loss,
    "object " + id.hex() + " is lost: " + what + ", stored only on node " + node +
      ", which died (" + reason + "); it is not made again: " + why,
    function, node);
}

void reference_table::on_node_died(const node_id& node, const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    const std::string where = node.short_hex();
    const std::string why = "it was stored only on node " + where + ", which died (" + reason + ")";
    for (auto& [id, e] : objects_) {
      if (!e.owned) {
        // Borrowed, read there: its owner says where it is now (a copy, a rebuild, lost).
        if (e.ready && e.value->ok && e.value->stored && e.value->node == node) {
          e.ready = false;
          e.fetch_sent = false;
          e.value.reset();
        }
        continue;
      }
      if (e.others) std::erase_if(e.others->copies, [&](const auto& c) { return c.first == node; });
      if (!e.ready || !e.value->ok || !e.value->stored || e.value->node != node) continue;
      if (e.durable) continue;  // on its node's disk: found through the head's directory
      if (e.others && !e.others->copies.empty()) {
        // Another node pulled a copy, kept until the object is freed: it is read there.
        auto& v = e.value.edit();
        std::tie(v.node, v.node_addr) = e.others->copies.back();
        e.others->copies.pop_back();
        continue;
      }
      if (e.made && e.made->spec) {
        if (e.holders > 0 || e.escaped || e.has_remote_waiters()) {
          start_rebuild(id, e, why);
        } else {
          // Kept only as another lineage's argument: made again if that task runs again.
          e.ready = false;
          e.dormant = true;
          e.value.reset();
          e.value.edit().id = id;
        }
        continue;
      }
      auto fail = lost_failure(id, e, where, reason);
      protocol::object_payload lost;
      lost.id = id;
      lost.fail = std::move(fail);
      e.value = std::move(lost);
    }
  }
  node_news_.notify_all();
  run_rebuilds();
}

void reference_table::fail_task(const task_id& task, const protocol::failure_info& fail) {
  protocol::object_payload v;
  v.id = protocol::task_spec::return_id_of(task);
  v.ok = false;
  v.fail = fail;
  std::lock_guard lock(mutex_);
  release_args(task);
  if (auto several = several_returns_.find(task); several != several_returns_.end()) {
    std::vector<protocol::object_payload> all;
    all.push_back(std::move(v));
    fill_missing_returns(task, several->second, all);
    several_returns_.erase(several);
    for (auto& r : all) fill_locked(std::move(r));
    return;
  }
  fill_locked(std::move(v));
}

} // namespace celer
