#include "core/task_submitter.hpp"

#include "config/knobs.hpp"
#include "log.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace celer {

task_submitter::task_submitter(transport& net, reference_table& objects, task_ids& ids,
                               endpoints where, clock now)
  : net_(net), objects_(objects), where_(std::move(where)), now_(std::move(now)), requests_(ids) {}

const std::string& task_submitter::task_entry::failures() const {
  static const std::string none;
  return failed ? failed->failures : none;
}

task_submitter::task_entry task_submitter::entry_of(protocol::task_spec spec, std::int32_t retries_left,
                                                    const exceptions_to_retry& retry_exceptions) {
  task_entry task;
  task.id = spec.id;
  task.args = std::move(spec.args);
  task.attempt = spec.attempt;
  task.retries_left = retries_left;
  task.shape = descriptors_.intern(std::move(spec), retry_exceptions);
  return task;
}

void task_submitter::submit(protocol::task_spec spec, retry_policy retry) {
  std::lock_guard lock(mutex_);
  stats_.count_submitted();
  if (stop_.stopped()) {
    fail_task(spec.id, protocol::failure_info::make(
                                  detail::failure_kind::runtime_stopped, error_code::failed_precondition,
                                  stop_.message(), spec.function));
    return;
  }
  auto task = entry_of(std::move(spec), retry.max_retries, retry.retry_exceptions);
  const auto& shape = task.shape->prototype;
  const std::size_t cls = class_of(shape);
  events_.record(task.id, protocol::task_state::waiting, task.attempt, {}, shape.function);
  task.submitted = now_();
  classes_[cls].queued.push_back(std::move(task));
  pump(cls);
}

void task_submitter::fail_task(const task_id& id, const protocol::failure_info& f) {
  stats_.count_failed();
  events_.record(id, protocol::task_state::failed, 0, f.message);
  objects_.fail_task(id, f);
}

std::size_t task_submitter::class_of(const protocol::task_spec& task) {
  for (std::size_t i = 0; i < classes_.size(); ++i) {
    const auto& c = classes_[i];
    if (c.shape.amounts == task.resources.amounts && c.where == task.where && c.priority == task.priority &&
        c.env_vars == task.env_vars) {
      return i;
    }
  }
  classes_.push_back({task.resources, task.where, task.priority, task.env_vars, {}});
  return classes_.size() - 1;
}

void task_submitter::pump(std::size_t cls) {
  auto& c = classes_[cls];
  const std::size_t depth =
    static_cast<std::size_t>(std::max(1, knobs().max_tasks_in_flight_per_worker));
  while (!c.queued.empty()) {
    // The leased worker of this class with the fewest tasks in flight, if it has room: an
    // idle one, or one running only tasks that never wait in get (pipelining).
    std::pair<const worker_id, lease>* best = nullptr;
    for (auto& entry : leases_) {
      auto& l = entry.second;
      if (l.cls != cls || l.running.size() >= depth) continue;
      if (!l.running.empty() && l.may_block > 0) continue;
      if (best == nullptr || l.running.size() < best->second.running.size()) best = &entry;
      if (l.running.empty()) break;
    }
    if (best == nullptr) break;
    auto task = std::move(c.queued.front());
    c.queued.pop_front();
    push(best->first, best->second, std::move(task));
  }
  if (c.queued.empty()) {
    // Every task found a worker: leases still asked for are not needed.
    if (requests_.pending(cls) > 0) cancel_requests(cls);
    rebalance(cls);
    return;
  }
  const std::size_t wanted =
    std::min(c.queued.size(), static_cast<std::size_t>(std::max(1, knobs().max_pending_lease_requests)));
  while (requests_.pending(cls) < wanted) {
    // The first waiting task describes the lease (without its arguments).
    const auto& first = c.queued.front().shape->prototype;
    protocol::request_lease req;
    req.spec.id = requests_.open(cls);
    req.spec.kind = protocol::task_kind::normal;
    req.spec.function = first.function;
    req.spec.resources = first.resources;
    req.spec.owner = first.owner;
    req.spec.job = first.job;
    req.spec.binary = first.binary;
    req.spec.package = first.package;
    req.spec.where = first.where;
    req.spec.priority = first.priority;
    req.spec.max_retries = first.max_retries;  // the memory monitor kills retriable work first
    req.spec.env_vars = first.env_vars;        // the worker process starts with them
    req.locality = objects_.locality_of(c.queued.front().args);
    const task_id rid = req.spec.id;
    const std::string function = first.function;
    CELER_LOG(debug, "core", "asks for a lease for " + function + " (" +
                               std::to_string(c.queued.size()) + " waiting)");
    if (!net_.send(lease_target(), std::move(req))) {
      (void)requests_.close(rid);
      fail_queued(c,
                  protocol::failure_info::make(detail::failure_kind::object_lost,
                                               error_code::unavailable,
                                               "the local node is unreachable"),
                  " not run: ");
      return;
    }
  }
}

void task_submitter::fail_queued(task_class& c, const protocol::failure_info& fail,
                                 const char* how) {
  auto queued = std::move(c.queued);
  c.queued.clear();
  for (auto& task : queued) {
    auto f = fail;
    f.function = task.function();
    f.message = "task " + task.function() + how + fail.message;
    if (task.failed) {
      // A retry that cannot start: the task failed as its last attempt did (so that the
      // caller's catch of worker_died_error or node_died_error still holds), and says why
      // it could not run again.
      retrying_.erase(task.id);
      const std::int32_t made = task.attempt - 1;
      const auto& failures = task.failed->failures;
      f.kind = task.failed->last_kind;
      f.code = task.failed->last_code;
      f.message = "task " + task.function() + " failed after " + std::to_string(made) +
                  (made == 1 ? " attempt: " : " attempts: ") +
                  failures.substr(0, failures.size() - 2) +
                  "; then it could not run again: " + fail.message;
    }
    fail_task(task.id, f);
  }
}

task_submitter::cancelled task_submitter::cancel(const task_id& id, bool force,
                                                 const protocol::failure_info& fail) {
  std::lock_guard lock(mutex_);
  const auto failure_of = [&](const std::string& function) {
    auto f = fail;
    f.function = function;
    f.message = "task " + function + " " + fail.message;
    return f;
  };
  for (std::size_t cls = 0; cls < classes_.size(); ++cls) {
    auto& q = classes_[cls].queued;
    auto it = std::find_if(q.begin(), q.end(), [&](const task_entry& t) { return t.id == id; });
    if (it == q.end()) continue;
    const auto f = failure_of(it->function());
    q.erase(it);
    retrying_.erase(id);
    fail_task(id, f);
    pump(cls);  // when nothing else waits, its lease requests are withdrawn
    return {cancelled::state::queued, {}, std::nullopt, {}};
  }
  auto r = running_.find(id);
  if (r == running_.end() || r->second.cancelled) return {};
  auto& p = r->second;
  p.cancelled = true;
  fail_task(id, failure_of(p.task.function()));
  const worker_id w = p.worker;
  auto l = leases_.find(w);
  if (l == leases_.end()) return {cancelled::state::pushed, {}, std::nullopt, {}};
  cancelled out{cancelled::state::pushed, l->second.worker, std::nullopt, {}};
  auto& lease = l->second;
  // A worker runs its tasks in order: only the first may have started. A task queued
  // behind it is taken out of the worker's inbox by the cancel_task instead.
  if (!force || !where_.workers_may_die || lease.running.front() != id) return out;
  lease.kill_for = id;
  if (lease.running.size() == 1) {
    out.kill = kill_lease(w, out.node);
    return out;
  }
  // The tasks queued behind it come back first, to run elsewhere; then it is killed.
  protocol::withdraw_tasks m;
  m.owner = where_.self;
  m.tasks.assign(lease.running.begin() + 1, lease.running.end());
  lease.withdrawing = true;
  if (!net_.send(lease.worker, std::move(m))) drop_lease(w, detail::failure_kind::worker_died, "unreachable");
  return out;
}

protocol::return_lease task_submitter::kill_lease(const worker_id& w, address& node) {
  auto it = leases_.find(w);
  protocol::return_lease m{w, it->second.request, {}, true};
  node = it->second.node_addr;
  for (const auto& t : it->second.running) running_.erase(t);
  CELER_LOG(info, "core", "kills worker " + w.short_hex() + ": a task it runs was cancelled with force");
  leases_.erase(it);
  return m;
}

void task_submitter::rebalance(std::size_t cls) {
  bool idle_lease = false;
  lease* most = nullptr;
  worker_id most_id;
  for (auto& [w, l] : leases_) {
    if (l.cls != cls) continue;
    if (l.running.empty()) idle_lease = true;
    if (l.withdrawing || l.may_block > 0 || l.running.size() < 2) continue;
    if (most == nullptr || l.running.size() > most->running.size()) {
      most = &l;
      most_id = w;
    }
  }
  if (!idle_lease || most == nullptr) return;
  // The later half: the first runs now, and the last are the least likely to have started.
  protocol::withdraw_tasks m;
  m.owner = where_.self;
  const std::size_t n = most->running.size() / 2;
  m.tasks.assign(most->running.end() - static_cast<std::ptrdiff_t>(n), most->running.end());
  most->withdrawing = true;
  if (!net_.send(most->worker, std::move(m))) most->withdrawing = false;
}

void task_submitter::on_returned(protocol::tasks_returned& m) {
  std::lock_guard lock(mutex_);
  auto lit = leases_.find(m.worker);
  if (lit == leases_.end()) return;  // dropped: its tasks were queued again already
  auto& l = lit->second;
  l.withdrawing = false;
  if (m.blocked || !m.blocked_function.empty()) {
    // Its call waits: nothing more goes to its worker until that call (the first running
    // there) finishes, or what comes back would be pushed straight back to it, round and
    // round, while the task it waits for never runs. One that waits in get is never queued
    // behind again; one waiting for its own arguments says nothing about its function.
    if (!m.blocked_function.empty()) functions_.saw_blocking(m.blocked_function);
    if (!l.running.empty()) {
      if (auto first = running_.find(l.running.front()); first != running_.end() && !first->second.may_block) {
        first->second.may_block = true;
        ++l.may_block;
      }
    }
  }
  std::vector<std::size_t> classes;
  // Backwards: each goes to the front of its class's queue, so they keep their order.
  for (auto t = m.tasks.rbegin(); t != m.tasks.rend(); ++t) {
    auto it = running_.find(t->id);
    if (it == running_.end() || it->second.worker != m.worker || it->second.task.attempt != t->attempt) {
      continue;
    }
    auto& p = it->second;
    if (p.cancelled) {
      // Cancelled while it waited there: its result failed already.
      if (p.may_block && l.may_block > 0) --l.may_block;
      std::erase(l.running, t->id);
      running_.erase(it);
      continue;
    }
    task_entry task = std::move(p.task);
    task.submitted = {};  // its scheduling latency was counted when it was first pushed
    if (!p.whole) task.args = std::move(t->args);  // they went to the worker, and came back
    if (p.may_block && l.may_block > 0) --l.may_block;
    std::erase(l.running, t->id);
    running_.erase(it);
    events_.record(task.id, protocol::task_state::waiting, task.attempt,
                   "given back unrun by worker " + m.worker.short_hex());
    const auto& shape = task.shape->prototype;
    const std::size_t cls = class_of(shape);
    classes_[cls].queued.push_front(std::move(task));
    if (std::find(classes.begin(), classes.end(), cls) == classes.end()) classes.push_back(cls);
  }
  if (!l.kill_for.nil()) {
    // A task it runs was cancelled with force: killed now, unless that task finished and
    // another started meanwhile (then nothing is killed).
    if (l.running.size() == 1 && l.running.front() == l.kill_for) {
      address node;
      auto kill = kill_lease(m.worker, node);
      (void)net_.send(node, std::move(kill));
    } else {
      l.kill_for = {};
    }
  }
  for (auto cls : classes) pump(cls);
  if (auto again = leases_.find(m.worker); again != leases_.end() && idle(again->second)) {
    went_idle(again->second);
  }
}

void task_submitter::push(const worker_id& w, lease& l, task_entry task) {
  const task_id id = task.id;
  if (task.attempt == 1 && task.submitted != time_point{}) {
    stats_.count_scheduled(std::chrono::duration_cast<std::chrono::microseconds>(now_() - task.submitted));
  }
  events_.record(id, protocol::task_state::running, task.attempt, l.node_hex);
  const bool may_block = !functions_.pipelinable(task.function());
  if (may_block) ++l.may_block;
  l.running.push_back(id);
  if (!retrying_.empty()) retrying_.erase(id);
  auto& p = running_[id];
  p.worker = w;
  p.alone_since = l.running.size() == 1 ? now_() : time_point{};
  p.may_block = may_block;
  bool sent = false;
  p.whole = task.may_retry() && (where_.workers_may_die || task.shape->retry_exceptions.any());
  if (p.whole) {
    // It may run again: kept here with its arguments, and sent as it is (over the wire,
    // its encoding: the arguments are not copied).
    protocol::message msg = protocol::execute_task{task.take_spec()};
    sent = net_.send_copy(l.worker, msg);
    task.args = std::move(std::get<protocol::execute_task>(msg).spec.args);
  } else {
    sent = net_.send(l.worker, protocol::execute_task{task.take_spec()});
  }
  p.task = std::move(task);
  if (!sent) drop_lease(w, detail::failure_kind::worker_died, "unreachable");
}

void task_submitter::retry(std::size_t cls, task_entry task, detail::failure_kind kind,
                           error_code code, const std::string& why) {
  const std::int32_t attempt = task.attempt;
  CELER_LOG(warn, "core", "task " + task.function() + ", attempt " + std::to_string(attempt) +
                            ", failed: " + why + "; it runs again (attempt " +
                            std::to_string(attempt + 1) + ")");
  if (!task.failed) task.failed = std::make_unique<failure_record>();
  task.failed->failures += "attempt " + std::to_string(attempt) + ": " + why + "; ";
  task.failed->last_kind = kind;
  task.failed->last_code = code;
  if (task.retries_left > 0) --task.retries_left;
  ++task.attempt;
  retrying_.insert(task.id);
  stats_.count_retry();
  events_.record(task.id, protocol::task_state::waiting, task.attempt,
                 "attempt " + std::to_string(attempt) + " failed: " + why);
  // At the front: it does not wait behind work submitted after it.
  classes_[cls].queued.push_front(std::move(task));
}

std::string task_submitter::final_message(const std::string& function, std::int32_t attempt,
                                          const std::string& failures, const std::string& last) {
  if (attempt <= 1) return "task " + function + " failed after 1 attempt: " + last;
  return "task " + function + " failed after " + std::to_string(attempt) + " attempts: " +
         failures + "attempt " + std::to_string(attempt) + ": " + last;
}

void task_submitter::drop_lease(const worker_id& w, detail::failure_kind kind,
                                const std::string& why) {
  auto it = leases_.find(w);
  if (it == leases_.end()) return;
  auto l = std::move(it->second);
  leases_.erase(it);
  // The connection to the dead worker (and to its dead node) goes: kept, each would hold
  // a socket and its mailbox, reconnecting forever, until the process ran out of files.
  net_.forget(l.worker.endpoint);
  if (kind == detail::failure_kind::node_died) net_.forget(l.node_addr.endpoint);
  const std::string cause = kind == detail::failure_kind::node_died
                              ? "its node " + l.node.short_hex() + " died (" + why + ")"
                              : "its worker process " + w.short_hex() + " died (" + why + ")";
  // Backwards: each retry goes to the front of the queue, so they keep their order.
  for (auto t = l.running.rbegin(); t != l.running.rend(); ++t) {
    auto r = running_.find(*t);
    if (r == running_.end()) continue;
    auto& p = r->second;
    if (p.cancelled) {
      running_.erase(r);  // failed already; never runs again
      continue;
    }
    if (p.whole && p.task.may_retry()) {
      auto task = std::move(p.task);
      running_.erase(r);
      retry(l.cls, std::move(task), kind, error_code::unavailable, cause);
      continue;
    }
    auto f = protocol::failure_info::make(
      kind, error_code::unavailable,
      final_message(p.task.function(), p.task.attempt, p.task.failures(), cause));
    f.function = p.task.function();
    running_.erase(r);
    f.node = l.node.short_hex();
    f.worker = w.short_hex();
    fail_task(*t, f);
  }
  pump(l.cls);
}

bool task_submitter::on_result(protocol::task_result& r) {
  std::lock_guard lock(mutex_);
  auto it = running_.find(r.task);
  if (it == running_.end()) {
    // Queued again after an attempt that failed: this is that attempt's late result.
    return !retrying_.empty() && retrying_.contains(r.task);
  }
  auto& p = it->second;
  // A late result of an earlier attempt (its worker was given up for dead): ignored.
  if (p.task.attempt != r.attempt) return true;
  const worker_id w = p.worker;
  const bool counted = p.may_block;
  if (p.cancelled) {
    // Its result failed when it was cancelled: what it came to is dropped (a value it
    // stored is not referenced here, and goes when the job ends).
    running_.erase(it);
    if (auto l = leases_.find(w); l != leases_.end()) {
      if (counted && l->second.may_block > 0) --l->second.may_block;
      std::erase(l->second.running, r.task);
      if (l->second.kill_for == r.task) l->second.kill_for = {};
      pump(l->second.cls);
      if (idle(l->second)) went_idle(l->second);
    }
    return true;
  }
  // Learn: a function whose task waited never runs pipelined again; one whose task ran
  // alone and came back quickly may.
  functions_.came_back(p.task.function(), r.blocked,
                       p.alone_since != time_point{} ? std::optional(now_() - p.alone_since) : std::nullopt);
  if (r.raised && !r.returns.empty()) {
    // Its own code threw: run it again if it may, else say what every attempt came to.
    const auto& thrown = r.returns.front().fail;
    const std::string why =
      "it threw" + (thrown.exception_type.empty() ? "" : " " + thrown.exception_type) + ": " + thrown.message;
    if (p.whole && p.task.shape->retry_exceptions.covers(thrown.exception_type) && p.task.may_retry()) {
      auto task = std::move(p.task);
      running_.erase(it);
      const auto& shape = task.shape->prototype;
      const std::size_t cls = class_of(shape);
      retry(cls, std::move(task), detail::failure_kind::task_error, r.returns.front().fail.code,
            why);
    } else {
      if (p.task.attempt > 1) {
        r.returns.front().fail.message =
          final_message(p.task.function(), p.task.attempt, p.task.failures(), why);
      }
      stats_.count_failed();
      events_.record(r.task, protocol::task_state::failed, p.task.attempt, r.returns.front().fail.message);
      running_.erase(it);
      objects_.finish_task(r.task, r.returns);
    }
  } else {
    reference_table::made_by made;
    if (std::any_of(r.returns.begin(), r.returns.end(), [](const auto& v) { return v.stored; })) {
      // A stored output can be lost with its node: the table keeps how to make it again.
      made.function = p.task.function();
      if (p.whole) {
        made.spec = p.task.take_spec();
        made.retries_left = p.task.retries_left;
        made.retry_exceptions = p.task.shape->retry_exceptions;
      } else {
        made.why_not = "its task " + made.function +
                       " has no retries left (max_retries is 0 or used up: give it max_retries, "
                       "or durable=true to keep the output on disk)";
      }
    }
    stats_.count_finished();
    events_.record(r.task, protocol::task_state::finished, p.task.attempt);
    running_.erase(it);
    objects_.finish_task(r.task, r.returns, std::move(made));
  }
  if (auto l = leases_.find(w); l != leases_.end()) {
    if (counted && l->second.may_block > 0) --l->second.may_block;
    std::erase(l->second.running, r.task);
    pump(l->second.cls);
    if (idle(l->second)) went_idle(l->second);
  }
  return true;
}

void task_submitter::rebuild(reference_table::rebuild r) {
  std::lock_guard lock(mutex_);
  if (stop_.stopped()) {
    fail_task(r.spec.id, protocol::failure_info::make(
                                    detail::failure_kind::object_lost, error_code::data_loss,
                                    r.why + "; it is not made again: celer is shutting down",
                                    r.spec.function));
    return;
  }
  auto task = entry_of(std::move(r.spec), r.retries_left, r.retry_exceptions);
  const auto& shape = task.shape->prototype;
  const std::size_t cls = class_of(shape);
  // Counted as a retry of the task: the attempt that made the lost output failed late.
  retry(cls, std::move(task), detail::failure_kind::object_lost, error_code::data_loss,
        "its output was lost: " + r.why);
  pump(cls);
}

void task_submitter::on_lease_reply(protocol::lease_reply& r) {
  std::lock_guard lock(mutex_);
  const auto answered = requests_.close(r.request);
  if (!answered) {
    // Asked for before the local node died and granted anyway: not needed any more.
    if (r.ok) (void)net_.send(r.node_addr, protocol::return_lease{r.worker, r.request});
    return;
  }
  const std::size_t cls = *answered;
  auto& c = classes_[cls];
  if (!r.ok && r.fail.kind == detail::failure_kind::worker_died) {
    lease_lost(cls, r.fail);
    return;
  }
  if (!r.ok) {
    // No node can ever run this shape: every task waiting for it fails with the reason.
    fail_queued(c, r.fail,
                r.fail.kind == detail::failure_kind::infeasible ? " can never run: " : " failed: ");
    return;
  }
  CELER_LOG(debug, "core", "leased worker " + r.worker.short_hex() + " on node " +
                             r.node.short_hex() + " for " + c.shape.to_string());
  if (c.queued.empty() || stop_.stopped()) {
    // Its tasks already ran on other leases: not needed.
    (void)net_.send(r.node_addr, protocol::return_lease{r.worker, r.request});
    return;
  }
  auto& l = leases_[r.worker];
  l.worker = r.worker_addr;
  l.node = r.node;
  l.node_hex = r.node.short_hex();
  l.node_addr = r.node_addr;
  l.request = r.request;
  l.cls = cls;
  pump(cls);
  // The waiting tasks went to other leases that had room first.
  if (idle(l)) went_idle(l);
}

void task_submitter::lease_lost(std::size_t cls, const protocol::failure_info& fail) {
  auto queued = std::move(classes_[cls].queued);
  classes_[cls].queued.clear();
  const std::string why = fail.message + ", while it started for a lease (node " + fail.node +
                          ", worker " + fail.worker + ")";
  // Backwards: each retry goes to the front of the queue, so they keep their order.
  for (auto t = queued.rbegin(); t != queued.rend(); ++t) {
    if (t->may_retry()) {
      retry(cls, std::move(*t), fail.kind, fail.code, why);
      continue;
    }
    auto f = fail;
    f.function = t->function();
    f.message = final_message(t->function(), t->attempt, t->failures(), why);
    retrying_.erase(t->id);
    fail_task(t->id, f);
  }
  pump(cls);
}

void task_submitter::on_worker_died(const protocol::worker_died& m) {
  std::lock_guard lock(mutex_);
  drop_lease(m.worker, detail::failure_kind::worker_died, m.reason);
}

void task_submitter::on_node_died(const protocol::node_died& m) {
  std::lock_guard lock(mutex_);
  std::vector<worker_id> lost;
  for (const auto& [w, l] : leases_) {
    if (l.node == m.node) lost.push_back(w);
  }
  for (const auto& w : lost) drop_lease(w, detail::failure_kind::node_died, m.reason);
  if (m.node == where_.this_node) requests_.local_node_died();
  // A lease request may have been waiting on that node: ask again (a late grant from
  // elsewhere is returned unused).
  requests_.forget_all();
  for (std::size_t i = 0; i < classes_.size(); ++i) pump(i);
}

void task_submitter::cancel_requests(std::optional<std::size_t> cls) {
  protocol::cancel_lease_requests m;
  m.owner = where_.self;
  m.requests = requests_.withdraw(cls);
  if (!m.requests.empty()) (void)net_.send(lease_target(), std::move(m));
}

bool task_submitter::idle(const lease& l) const {
  return l.running.empty() && classes_[l.cls].queued.empty();
}

void task_submitter::went_idle(lease& l) {
  l.idle_since = now_();
  reaper_.lease_went_idle();
}

task_submitter::time_point task_submitter::return_idle(time_point now) {
  std::lock_guard lock(mutex_);
  return return_idle_locked(now);
}

task_submitter::time_point task_submitter::return_idle_locked(time_point now) {
  const auto linger = std::chrono::milliseconds(std::max(0, knobs().lease_idle_ms));
  auto next = time_point::max();
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (!idle(it->second)) {
      ++it;
    } else if (now - it->second.idle_since >= linger) {
      CELER_LOG(debug, "core", "returning idle worker " + it->first.short_hex());
      (void)net_.send(it->second.node_addr, protocol::return_lease{it->first, it->second.request});
      it = leases_.erase(it);
    } else {
      next = std::min(next, it->second.idle_since + linger);
      ++it;
    }
  }
  return next;
}

void task_submitter::run_reaper() {
  std::unique_lock lock(mutex_);
  while (!stop_.stopped()) {
    reaper_.sleep(lock, return_idle_locked(now_()));
  }
}

std::optional<protocol::explain_placement> task_submitter::waiting(const object_id& result) const {
  std::lock_guard lock(mutex_);
  for (const auto& c : classes_) {
    for (const auto& task : c.queued) {
      if (protocol::task_spec::return_id_of(task.id) == result) {
        protocol::explain_placement q;
        q.need = task.shape->prototype.resources;
        q.where = task.shape->prototype.where;
        return q;
      }
    }
  }
  return std::nullopt;  // running, done, or not a task of this process
}

void task_submitter::attach_node(address node, node_id id) {
  std::lock_guard lock(mutex_);
  where_.node = std::move(node);
  where_.this_node = id;
  requests_.local_node_attached();
}

void task_submitter::stop(const std::string& reason) {
  std::lock_guard lock(mutex_);
  (void)stop_.stop(reason);  // the first stop's reason stands
  for (const auto& [w, l] : leases_) {
    (void)net_.send(l.node_addr, protocol::return_lease{w, l.request});
  }
  leases_.clear();
  cancel_requests(std::nullopt);
  reaper_.wake();
}

std::size_t task_submitter::leases() const {
  std::lock_guard lock(mutex_);
  return leases_.size();
}

std::size_t task_submitter::queued() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& c : classes_) n += c.queued.size();
  return n;
}

std::size_t task_submitter::running() const {
  std::lock_guard lock(mutex_);
  return running_.size();
}

std::size_t task_submitter::retries() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(stats_.retries());
}

protocol::task_counts task_submitter::counts(bool take_changes) {
  std::lock_guard lock(mutex_);
  protocol::task_counts c;
  stats_.report(c);
  for (const auto& cls : classes_) c.waiting += cls.queued.size();
  c.running = running_.size();
  if (take_changes) events_.take(c);
  return c;
}

std::size_t task_submitter::descriptors() const {
  std::lock_guard lock(mutex_);
  return descriptors_.size();
}

std::size_t task_submitter::lease_requests() const {
  std::lock_guard lock(mutex_);
  return requests_.size();
}

} // namespace celer
