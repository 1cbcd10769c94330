#include "core/core_worker.hpp"

#include "config/knobs.hpp"
#include "log.hpp"
#include "scheduler/labels.hpp"

#include <algorithm>
#include <thread>
#include <chrono>
#include <cstring>
#include <random>
#include <sstream>

namespace celer {

worker_context*& current_worker_context() noexcept {
  thread_local worker_context* ctx = nullptr;
  return ctx;
}

namespace {

protocol::failure_info make_failure(detail::failure_kind kind, error_code code, std::string msg) {
  return protocol::failure_info::make(kind, code, std::move(msg));
}

std::string millis(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

protocol::resource_set checked_request(const std::string& what, double cpus, double gpus,
                                       double memory, const std::map<std::string, double>& custom) {
  auto req = protocol::make_request(cpus, gpus, memory, custom);
  if (!req) throw exception(req.error().code(), what + ": " + req.error().message());
  return std::move(*req);
}

/// Where a task or actor may go and how to choose, from its options.
protocol::placement checked_placement(const std::string& what, const std::string& accelerator_type,
                                      double gpu_memory_gb,
                                      const std::vector<std::string>& label_selector,
                                      const scheduling_strategy& strategy) {
  protocol::placement p;
  if (!(gpu_memory_gb >= 0)) {
    throw exception(error_code::invalid_argument,
                    what + ": gpu_memory_gb must be zero or positive, got " +
                      protocol::format_amount(gpu_memory_gb));
  }
  auto labels = scheduling::parse_label_selectors(label_selector);
  if (!labels) throw exception(labels.error().code(), what + ": " + labels.error().message());
  if (strategy.how == scheduling_strategy::kind::node_affinity && strategy.node.nil()) {
    throw exception(error_code::invalid_argument,
                    what + ": node affinity needs a node id (scheduling_strategy::node_affinity)");
  }
  if (strategy.how == scheduling_strategy::kind::placement_group && strategy.group.nil()) {
    throw exception(error_code::invalid_argument,
                    what + ": a placement group strategy needs the group (placement_group::bundle)");
  }
  p.group = strategy.group;
  p.bundle = strategy.bundle;
  p.how = strategy.how;
  p.node = strategy.node;
  p.soft = strategy.soft;
  p.accelerator_type = accelerator_type;
  p.gpu_memory_bytes = static_cast<std::uint64_t>(gpu_memory_gb * 1e9);
  p.labels = std::move(*labels);
  return p;
}

} // namespace

core_worker::core_worker(transport& net, endpoints where)
  : net_(net), where_(std::move(where)), id_prefix_(unique_id::random().hi | 1),
    requests_(net_, where_.self, where_.now), head_(net_, requests_, where_.head),
    store_(net_, requests_, {where_.self, where_.node, where_.this_node, where_.job},
           [this](const protocol::object_copied& c) {
             std::lock_guard lock(mutex_);
             on_copied(c);
           }),
    link_(std::make_shared<link>()) {
  link_->core = this;
  lease_reaper_ = std::thread([this] { return_idle_leases(); });
}

core_worker::~core_worker() {
  stop("the core is destroyed");
  lease_reaper_.join();
}

task_id core_worker::next_task_id() {
  // The low 16 bits are left for the return index (task_spec::return_id).
  return task_id(unique_id{id_prefix_, (counter_.fetch_add(1, std::memory_order_relaxed) + 1) << 16});
}

void core_worker::check_running() const {
  if (stopped_ && stop_code_) throw exception(*stop_code_, stop_reason_);
  if (stopped_) {
    throw exception(error_code::failed_precondition, "celer is shutting down: " + stop_reason_);
  }
}

std::vector<protocol::task_arg> core_worker::to_wire(std::vector<detail::arg_spec> args,
                                                     const task_id& task) {
  std::vector<protocol::task_arg> out;
  out.reserve(args.size());
  for (auto& a : args) {
    protocol::task_arg t;
    t.is_ref = a.is_ref;
    t.ref = a.ref;
    t.owner = std::move(a.owner);
    t.value = std::move(a.value);
    if (t.is_ref && t.owner == where_.self) {
      // An object this process owns and already holds travels inline: the worker need
      // not ask for it (unless it is in the object store: the worker maps it there).
      auto it = objects_.find(t.ref);
      if (it != objects_.end() && it->second.ready && it->second.value.ok &&
          !it->second.value.stored) {
        t.is_ref = false;
        t.value = it->second.value.payload;
      } else if (it != objects_.end() && it->second.owned) {
        // Kept until the task finishes (an actor's constructor: until the job ends).
        if (task.nil()) {
          it->second.escaped = true;
        } else {
          ++it->second.task_uses;
          task_args_[task].push_back(t.ref);
        }
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

object_ref<void> core_worker::submit_task(const detail::remote_entry& fn,
                                          std::vector<detail::arg_spec> args,
                                          const task_options& options) {
  protocol::task_spec spec;
  spec.resources =
    checked_request(fn.name, options.num_cpus, options.num_gpus, options.memory, options.resources);
  spec.id = next_task_id();
  spec.kind = protocol::task_kind::normal;
  spec.function = fn.name;
  spec.owner = where_.self;
  spec.job = where_.job;
  spec.binary = where_.binary;
  spec.durable = options.durable;
  spec.where = checked_placement(fn.name, options.accelerator_type, options.gpu_memory_gb,
                                 options.label_selector, options.scheduling);
  spec.priority = options.priority.value_or(default_priority());
  const object_id ret = spec.return_id();
  // Held until the task has counted its use of them (released after the lock).
  const auto stored = store_large_args(args);
  std::lock_guard lock(mutex_);
  check_running();
  spec.args = to_wire(std::move(args), spec.id);
  objects_[ret].owned = true;
  auto ref = owned_ref(ret);
  const std::size_t cls = class_of(spec.resources, spec.where, spec.priority);
  classes_[cls].queued.push_back(std::move(spec));
  pump(cls);
  return ref;
}

std::size_t core_worker::class_of(const protocol::resource_set& shape,
                                  const protocol::placement& where, std::int32_t priority) {
  for (std::size_t i = 0; i < classes_.size(); ++i) {
    const auto& c = classes_[i];
    if (c.shape.amounts == shape.amounts && c.where == where && c.priority == priority) return i;
  }
  classes_.push_back({shape, where, priority, {}, 0});
  return classes_.size() - 1;
}

std::int32_t core_worker::default_priority() const {
  if (const auto* ctx = current_worker_context(); ctx != nullptr) return ctx->priority;
  return where_.priority;
}

std::vector<protocol::node_bytes> core_worker::locality_of(const protocol::task_spec& spec) const {
  std::vector<protocol::node_bytes> out;
  for (const auto& a : spec.args) {
    if (!a.is_ref) continue;
    const auto it = objects_.find(a.ref);
    if (it == objects_.end() || !it->second.ready || !it->second.value.stored) continue;
    const auto& v = it->second.value;
    auto same = std::find_if(out.begin(), out.end(), [&](const auto& n) { return n.node == v.node; });
    if (same == out.end()) {
      out.push_back({v.node, v.size});
    } else {
      same->bytes += v.size;
    }
  }
  return out;
}

void core_worker::pump(std::size_t cls) {
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
    auto spec = std::move(c.queued.front());
    c.queued.pop_front();
    push(best->first, best->second, std::move(spec));
  }
  if (c.queued.empty()) {
    // Every task found a worker: leases still asked for are not needed.
    if (c.requests > 0) cancel_requests(cls);
    return;
  }
  const std::size_t wanted =
    std::min(c.queued.size(), static_cast<std::size_t>(std::max(1, knobs().max_pending_lease_requests)));
  while (c.requests < wanted) {
    // The first waiting task describes the lease (without its arguments).
    const auto& first = c.queued.front();
    protocol::request_lease req;
    req.spec.id = next_task_id();
    req.spec.kind = protocol::task_kind::normal;
    req.spec.function = first.function;
    req.spec.resources = first.resources;
    req.spec.owner = first.owner;
    req.spec.job = first.job;
    req.spec.binary = first.binary;
    req.spec.where = first.where;
    req.spec.priority = first.priority;
    req.locality = locality_of(first);
    const task_id rid = req.spec.id;
    const std::string function = first.function;
    lease_requests_[rid] = cls;
    ++c.requests;
    CELER_LOG(debug, "core", "asks for a lease for " + function + " (" +
                               std::to_string(c.queued.size()) + " waiting)");
    if (!net_.send(node_dead_ ? where_.head : where_.node, std::move(req))) {
      lease_requests_.erase(rid);
      --c.requests;
      const auto f = make_failure(detail::failure_kind::object_lost, error_code::unavailable,
                                  "the local node is unreachable; task " + function + " not run");
      auto queued = std::move(c.queued);
      c.queued.clear();
      for (auto& spec : queued) fail_object(spec.return_id(), f);
      return;
    }
  }
}

bool core_worker::pipelinable(const std::string& function) const {
  auto it = never_blocks_.find(function);
  return it != never_blocks_.end() && it->second;
}

void core_worker::push(const worker_id& w, lease& l, protocol::task_spec spec) {
  const task_id id = spec.id;
  const bool may_block = !pipelinable(spec.function);
  if (may_block) ++l.may_block;
  running_[id] = {w, spec.function, may_block};
  l.running.push_back(id);
  if (!net_.send(l.worker, protocol::execute_task{std::move(spec)})) {
    drop_lease(w, detail::failure_kind::worker_died, "is unreachable");
  }
}

void core_worker::drop_lease(const worker_id& w, detail::failure_kind kind, const std::string& why) {
  auto it = leases_.find(w);
  if (it == leases_.end()) return;
  auto l = std::move(it->second);
  leases_.erase(it);
  for (const auto& t : l.running) {
    auto r = running_.find(t);
    if (r == running_.end()) continue;
    const std::string function = r->second.function;
    running_.erase(r);
    auto f = make_failure(kind, error_code::unavailable,
                          "task " + function + " failed: " +
                            (kind == detail::failure_kind::node_died
                               ? "its node " + l.node.short_hex() + " died (" + why + ")"
                               : "its worker process " + why));
    f.function = function;
    f.node = l.node.short_hex();
    f.worker = w.short_hex();
    fail_object(protocol::task_spec::return_id_of(t), f);
  }
  pump(l.cls);
}

void core_worker::on_lease_reply(protocol::lease_reply& r) {
  auto req = lease_requests_.find(r.request);
  if (req == lease_requests_.end()) {
    // Asked for before the local node died and granted anyway: not needed any more.
    if (r.ok) (void)net_.send(r.node_addr, protocol::return_lease{r.worker, r.request});
    return;
  }
  const std::size_t cls = req->second;
  lease_requests_.erase(req);
  auto& c = classes_[cls];
  --c.requests;
  if (!r.ok) {
    // No node can ever run this shape (or the worker started for it died before it could
    // be lent): every task waiting for it fails with the reason.
    auto queued = std::move(c.queued);
    c.queued.clear();
    for (auto& spec : queued) {
      auto f = r.fail;
      f.function = spec.function;
      f.message = "task " + spec.function +
                  (f.kind == detail::failure_kind::infeasible ? " can never run: " : " failed: ") +
                  r.fail.message;
      fail_object(spec.return_id(), f);
    }
    return;
  }
  CELER_LOG(debug, "core", "leased worker " + r.worker.short_hex() + " on node " +
                             r.node.short_hex() + " for " + c.shape.to_string());
  if (c.queued.empty()) {
    // Its tasks already ran on other leases: not needed.
    (void)net_.send(r.node_addr, protocol::return_lease{r.worker, r.request});
    return;
  }
  auto& l = leases_[r.worker];
  l.worker = r.worker_addr;
  l.node = r.node;
  l.node_addr = r.node_addr;
  l.request = r.request;
  l.cls = cls;
  pump(cls);
  if (idle(l)) {
    // The waiting tasks went to other leases that had room first.
    l.idle_since = std::chrono::steady_clock::now();
    lease_cv_.notify_one();
  }
}

void core_worker::cancel_requests(std::optional<std::size_t> cls) {
  protocol::cancel_lease_requests m;
  m.owner = where_.self;
  for (auto it = lease_requests_.begin(); it != lease_requests_.end();) {
    if (cls && it->second != *cls) {
      ++it;
      continue;
    }
    m.requests.push_back(it->first);
    --classes_[it->second].requests;
    it = lease_requests_.erase(it);
  }
  if (!m.requests.empty()) (void)net_.send(node_dead_ ? where_.head : where_.node, std::move(m));
}

bool core_worker::idle(const lease& l) const {
  return l.running.empty() && classes_[l.cls].queued.empty();
}

void core_worker::return_idle_leases() {
  const auto linger = std::chrono::milliseconds(std::max(0, knobs().lease_idle_ms));
  std::unique_lock lock(mutex_);
  while (!stopped_) {
    const auto now = std::chrono::steady_clock::now();
    auto next = std::chrono::steady_clock::time_point::max();
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
    if (next == std::chrono::steady_clock::time_point::max()) {
      lease_cv_.wait(lock);
    } else {
      lease_cv_.wait_until(lock, next);
    }
  }
}

object_ref<void> core_worker::put(std::string payload) {
  const task_id t = next_task_id();
  const object_id id(unique_id{t.hi, t.lo | 1});
  std::lock_guard lock(mutex_);
  check_running();
  auto& e = objects_[id];
  e.ready = true;
  e.owned = true;
  e.value.id = id;
  e.value.ok = true;
  e.value.payload = std::move(payload);
  return owned_ref(id);
}

protocol::object_payload core_worker::store_value(const object_id& id, std::size_t size,
                                                  unsigned char first, bool durable,
                                                  const address& owner, const job_id& job,
                                                  const std::function<void(char*)>& write) {
  return store_.store_value(id, size, first, durable, owner, job, write);
}

object_ref<void> core_worker::put_stored(std::size_t size, unsigned char first, bool durable,
                                         const std::function<void(char*)>& write) {
  const task_id t = next_task_id();
  const object_id id(unique_id{t.hi, t.lo | 1});
  auto v = store_.store_value(id, size, first, durable, where_.self, where_.job, write);
  if (!v.ok) throw exception(v.fail.code, "celer::put: " + v.fail.message);
  std::lock_guard lock(mutex_);
  check_running();
  auto& e = objects_[id];
  e.ready = true;
  e.owned = true;
  e.value = std::move(v);
  return owned_ref(id);
}

std::vector<object_ref<void>> core_worker::store_large_args(std::vector<detail::arg_spec>& args) {
  const auto limit = static_cast<std::size_t>(knobs().inline_object_bytes);
  std::vector<object_ref<void>> stored;
  for (auto& a : args) {
    if (a.is_ref || a.value.size() <= limit) continue;
    const std::string value = std::move(a.value);
    auto ref = put_stored(value.size(), static_cast<unsigned char>(value[0]), false,
                          [&](char* out) { std::memcpy(out, value.data(), value.size()); });
    a = detail::arg_spec{true, ref.id(), ref.owner(), {}};
    stored.push_back(std::move(ref));
  }
  return stored;
}

object_ref<void> core_worker::owned_ref(const object_id& id) {
  auto& e = objects_[id];
  ++e.holders;
  std::weak_ptr<link> weak = link_;
  return object_ref<void>(id, where_.self,
                          std::shared_ptr<const void>(link_.get(), [weak, id](const void*) {
                            if (auto l = weak.lock()) {
                              std::lock_guard g(l->m);
                              if (l->core != nullptr) l->core->release_hold(id);
                            }
                          }));
}

void core_worker::escaped(const object_id& id) {
  std::lock_guard lock(mutex_);
  if (auto it = objects_.find(id); it != objects_.end()) it->second.escaped = true;
}

void core_worker::release_hold(const object_id& id) {
  std::lock_guard lock(mutex_);
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  --it->second.holders;
  maybe_free(id);
}

void core_worker::maybe_free(const object_id& id) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  auto& e = it->second;
  if (!e.owned || e.escaped || e.holders > 0 || e.task_uses > 0 || !e.ready) return;
  if (e.value.stored) {
    (void)net_.send(e.value.node_addr, protocol::store_free{{id}});
    for (const auto& node : e.copies) (void)net_.send(node, protocol::store_free{{id}});
  }
  objects_.erase(it);
}

void core_worker::on_copied(const protocol::object_copied& m) {
  auto it = objects_.find(m.id);
  if (it == objects_.end() || !it->second.owned) {
    // Freed before the news arrived: the copy goes too.
    (void)net_.send(m.node_addr, protocol::store_free{{m.id}});
    return;
  }
  auto& copies = it->second.copies;
  if (std::find(copies.begin(), copies.end(), m.node_addr) == copies.end()) {
    copies.push_back(m.node_addr);
  }
}

std::size_t core_worker::owned_objects() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
    std::count_if(objects_.begin(), objects_.end(), [](const auto& kv) { return kv.second.owned; }));
}

std::size_t core_worker::prepare(const std::vector<object_ref<void>>& refs) {
  std::size_t ready = 0;
  for (const auto& r : refs) {
    auto [it, inserted] = objects_.try_emplace(r.id());
    auto& e = it->second;
    if (inserted) {
      if (r.owner() == where_.self || r.owner().nil()) {
        e.ready = true;
        e.value.id = r.id();
        e.value.fail = make_failure(detail::failure_kind::object_lost, error_code::not_found,
                                    "object " + r.id().hex() +
                                      " is not known to its owner: it was never created here");
      } else if (!e.fetch_sent) {
        e.fetch_sent = true;
        if (!net_.send(r.owner(), protocol::get_object{r.id(), where_.self})) {
          e.ready = true;
          e.value.id = r.id();
          e.value.fail = make_failure(detail::failure_kind::object_lost, error_code::unavailable,
                                      "object " + r.id().hex() +
                                        " is lost: its owner is unreachable");
        }
      }
    }
    if (e.ready) ++ready;
  }
  return ready;
}

bool core_worker::block_until(std::unique_lock<std::mutex>& lock, detail::timeout_t timeout,
                              const std::function<bool()>& done) {
  if (done()) return true;
  // A worker blocked in get lends its CPUs back to the node so that the tasks it waits
  // for can run (otherwise nested tasks deadlock once every CPU is held by a waiter).
  worker_context* ctx = current_worker_context();
  if (ctx != nullptr) {
    ctx->blocked = true;
    (void)net_.send(ctx->node, protocol::worker_blocked{ctx->worker});
  }
  auto pred = [&] { return stopped_ || done(); };
  if (timeout) {
    ready_cv_.wait_for(lock, *timeout, pred);
  } else {
    ready_cv_.wait(lock, pred);
  }
  if (ctx != nullptr) (void)net_.send(ctx->node, protocol::worker_unblocked{ctx->worker});
  return done();
}

std::vector<detail::fetched> core_worker::fetch(const std::vector<object_ref<void>>& refs,
                                                detail::timeout_t timeout) {
  std::unique_lock lock(mutex_);
  check_running();
  std::size_t ready = prepare(refs);
  // Objects never become unready, so each wake-up resumes the scan where the last one
  // stopped: waiting for n objects costs O(n) lookups in all, not O(n) per arrival.
  std::size_t scanned = 0;
  auto all_ready = [&] {
    while (scanned < refs.size() && objects_[refs[scanned].id()].ready) ++scanned;
    return scanned == refs.size();
  };
  if (ready < refs.size() && !block_until(lock, timeout, all_ready)) {
    check_running();
    std::size_t missing = 0;
    const object_id* first = nullptr;
    for (const auto& r : refs) {
      if (!objects_[r.id()].ready) {
        ++missing;
        if (first == nullptr) first = &r.id();
      }
    }
    throw get_timeout_error("celer::get timed out after " + millis(*timeout) + ": " +
                            std::to_string(missing) + " of " + std::to_string(refs.size()) +
                            " object(s) not ready (first: " + first->hex() + ")");
  }
  std::vector<detail::fetched> out;
  out.reserve(refs.size());
  std::vector<std::pair<std::size_t, protocol::object_payload>> stored;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const auto& v = objects_[refs[i].id()].value;
    detail::fetched f;
    f.ok = v.ok;
    if (v.ok && v.stored) {
      stored.emplace_back(i, v);
    } else if (v.ok) {
      f.payload = v.payload;
    } else {
      f.fail = v.fail.to_failure();
    }
    out.push_back(std::move(f));
  }
  if (stored.empty()) return out;
  // Large objects are mapped from this node's store (pulled here first when elsewhere),
  // without mutex_: the node may take a while.
  lock.unlock();
  // All asked at once: pulls from other nodes run in parallel.
  std::vector<store_client::pending_map> asked;
  asked.reserve(stored.size());
  for (auto& [i, v] : stored) asked.push_back(store_.start_map(v, refs[i].owner()));
  for (std::size_t k = 0; k < stored.size(); ++k) {
    auto& [i, v] = stored[k];
    out[i] = store_.finish_map(asked[k]);
    if (out[i].ok || !where_.cluster) continue;
    // Its node is gone: a durable copy may live on (on a node agent restarted on the same
    // machine, under a new id). The head's directory knows.
    protocol::object_location at;
    try {
      at = head_.locate_object(v.id);
    } catch (const exception&) {
      continue;  // the first failure stands
    }
    if (!at.found || at.node == v.node) continue;
    v.node = at.node;
    v.node_addr = at.node_addr;
    auto again = store_.map_stored(v, refs[i].owner());
    if (!again.ok) continue;
    out[i] = std::move(again);
    std::lock_guard relock(mutex_);
    if (auto e = objects_.find(v.id); e != objects_.end() && e->second.value.stored) {
      e->second.value.node = at.node;
      e->second.value.node_addr = at.node_addr;
    }
  }
  return out;
}

std::vector<std::size_t> core_worker::wait_ready(const std::vector<object_ref<void>>& refs,
                                                 std::size_t num_returns,
                                                 detail::timeout_t timeout) {
  if (num_returns > refs.size()) {
    throw exception(error_code::invalid_argument,
                    "celer::wait: num_returns (" + std::to_string(num_returns) +
                      ") exceeds the number of refs (" + std::to_string(refs.size()) + ")");
  }
  std::unique_lock lock(mutex_);
  check_running();
  prepare(refs);
  auto count = [&] {
    std::size_t n = 0;
    for (const auto& r : refs) n += objects_[r.id()].ready ? 1 : 0;
    return n;
  };
  block_until(lock, timeout, [&] { return count() >= num_returns; });
  check_running();
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    if (objects_[refs[i].id()].ready) out.push_back(i);
  }
  return out;
}

void core_worker::fill(protocol::object_payload value) {
  // A task's result (or failure) ends its use of the objects it took by ref.
  const object_id id = value.id;
  if ((id.lo & 0xffff) == 1) {
    const task_id task(unique_id{id.hi, id.lo & ~std::uint64_t{0xffff}});
    if (auto t = task_args_.find(task); t != task_args_.end()) {
      auto used = std::move(t->second);
      task_args_.erase(t);
      for (const auto& arg : used) {
        if (auto a = objects_.find(arg); a != objects_.end()) --a->second.task_uses;
        maybe_free(arg);
      }
    }
  }
  auto it = objects_.find(id);
  if (it == objects_.end() || it->second.ready) {
    // Unknown (no one held it any more, so it was freed) or already failed: stale. A
    // stored copy made for it is freed.
    if (value.stored && it == objects_.end()) {
      (void)net_.send(value.node_addr, protocol::store_free{{id}});
    }
    return;
  }
  auto& e = it->second;
  for (const auto& w : e.remote_waiters) (void)net_.send(w, protocol::object_reply{value});
  e.remote_waiters.clear();
  e.value = std::move(value);
  e.ready = true;
  ready_cv_.notify_all();
  maybe_free(id);
}

void core_worker::fail_object(const object_id& id, const protocol::failure_info& fail) {
  protocol::object_payload v;
  v.id = id;
  v.ok = false;
  v.fail = fail;
  fill(std::move(v));
}

core_worker::actor_entry& core_worker::actor_slot(const actor_id& id) {
  auto& a = actors_[id];
  if (!a.subscribed) {
    a.subscribed = true;
    if (!net_.send(where_.head, protocol::subscribe_actor{id, where_.self})) {
      a.state = protocol::actor_state::dead;
      a.fail = make_failure(detail::failure_kind::actor_died, error_code::unavailable,
                            "actor " + id.hex() + ": the head is unreachable");
    }
  }
  return a;
}

void core_worker::send_call(actor_entry& actor, protocol::task_spec spec) {
  const object_id ret = spec.return_id();
  switch (actor.state) {
    case protocol::actor_state::pending:
    case protocol::actor_state::restarting:
      actor.queued.push_back(std::move(spec));
      return;
    case protocol::actor_state::dead:
      fail_object(ret, actor.fail);
      return;
    case protocol::actor_state::alive: {
      const task_id id = spec.id;
      actor.in_flight.insert(id);
      call_actor_[id] = spec.actor;
      if (actor.max_task_retries != 0) actor.unanswered.push_back(spec);
      const actor_id target = spec.actor;
      if (!net_.send(actor.worker, protocol::execute_task{std::move(spec)})) {
        actor.in_flight.erase(id);
        call_actor_.erase(id);
        fail_object(ret, make_failure(detail::failure_kind::actor_died, error_code::unavailable,
                                      "actor " + target.hex() + " is unreachable: its worker is gone"));
      }
      return;
    }
  }
}

void core_worker::fail_actor_calls(actor_entry& actor, const actor_id& id) {
  for (auto& spec : actor.queued) fail_object(spec.return_id(), actor.fail);
  actor.queued.clear();
  for (const auto& t : actor.in_flight) {
    fail_object(protocol::task_spec::return_id_of(t), actor.fail);
    call_actor_.erase(t);
  }
  actor.in_flight.clear();
  actor.unanswered.clear();
  actor.resent.clear();
}

void core_worker::requeue_actor_calls(actor_entry& actor, const actor_id& id) {
  std::deque<protocol::task_spec> again;
  for (auto& spec : actor.unanswered) {
    if (!actor.in_flight.contains(spec.id)) continue;
    auto& times = actor.resent[spec.id];
    if (actor.max_task_retries >= 0 && times >= actor.max_task_retries) continue;
    ++times;
    actor.in_flight.erase(spec.id);
    call_actor_.erase(spec.id);
    again.push_back(std::move(spec));
  }
  actor.unanswered.clear();
  for (const auto& t : actor.in_flight) {
    const auto tries = actor.resent.find(t);
    const std::string retried =
      tries == actor.resent.end() || tries->second == 0
        ? "its calls are not sent again (max_task_retries is 0)"
        : "it was sent " + std::to_string(tries->second + 1) + " times (max_task_retries " +
            std::to_string(actor.max_task_retries) + ")";
    fail_object(protocol::task_spec::return_id_of(t),
                make_failure(detail::failure_kind::actor_died, error_code::unavailable,
                             "actor " + id.hex() + " died while running this call, and " +
                               retried + ": " + actor.fail.message));
    call_actor_.erase(t);
    actor.resent.erase(t);
  }
  actor.in_flight.clear();
  // Sent again first, in their order, before the calls made since.
  for (auto& spec : actor.queued) again.push_back(std::move(spec));
  actor.queued = std::move(again);
}

actor_id core_worker::create_actor(const detail::remote_entry& factory,
                                   std::vector<detail::arg_spec> args,
                                   const actor_options& options) {
  if (options.max_concurrency < 1) {
    throw exception(error_code::invalid_argument,
                    factory.name + ": max_concurrency must be at least 1, got " +
                      std::to_string(options.max_concurrency));
  }
  if (options.max_restarts < -1 || options.max_task_retries < -1) {
    throw exception(error_code::invalid_argument,
                    factory.name + ": max_restarts and max_task_retries take -1 (no limit), 0 or "
                                   "more, got " +
                      std::to_string(options.max_restarts) + " and " +
                      std::to_string(options.max_task_retries));
  }
  protocol::create_actor msg;
  auto& spec = msg.spec;
  spec.resources = checked_request(factory.name, options.num_cpus, options.num_gpus,
                                   options.memory, options.resources);
  spec.where = checked_placement(factory.name, options.accelerator_type, options.gpu_memory_gb,
                                 options.label_selector, options.scheduling);
  spec.id = next_task_id();
  spec.kind = protocol::task_kind::actor_creation;
  spec.function = factory.name;
  spec.owner = where_.self;
  spec.actor = actor_id::random();
  spec.actor_name = options.name;
  spec.class_type = factory.class_type;
  spec.max_concurrency = options.max_concurrency;
  spec.priority = options.priority.value_or(default_priority());
  spec.preemptible = options.preemptible;
  spec.preemption_grace_ms = options.preemption_grace.count();
  spec.max_restarts = options.max_restarts;
  spec.max_task_retries = options.max_task_retries;
  spec.restore_method = options.restore_method;
  spec.job = where_.job;
  spec.binary = where_.binary;
  const actor_id id = spec.actor;
  const auto stored = store_large_args(args);
  {
    std::lock_guard lock(mutex_);
    check_running();
    spec.args = to_wire(std::move(args), task_id{});
    auto& a = actors_[id];
    a.subscribed = true;  // the head tells the creator about its actor
    a.max_task_retries = options.max_task_retries;
  }
  msg.reply_to = where_.self;
  msg.request_id = requests_.next_id();
  const auto rid = msg.request_id;
  auto reply = requests_.request(where_.head, std::move(msg), rid);
  auto& r = std::get<protocol::create_actor_reply>(reply);
  if (!r.ok) {
    std::lock_guard lock(mutex_);
    actors_.erase(id);
    detail::throw_failure(r.fail.to_failure());
  }
  return id;
}

object_ref<void> core_worker::submit_actor_call(const actor_id& actor,
                                                const detail::remote_entry& method,
                                                std::vector<detail::arg_spec> args) {
  if (actor.nil()) {
    throw exception(error_code::invalid_argument,
                    method.name + ": called through an empty actor handle");
  }
  protocol::task_spec spec;
  spec.id = next_task_id();
  spec.kind = protocol::task_kind::actor_call;
  spec.function = method.name;
  spec.owner = where_.self;
  spec.actor = actor;
  const object_id ret = spec.return_id();
  const auto stored = store_large_args(args);  // released after the lock
  std::lock_guard lock(mutex_);
  check_running();
  spec.args = to_wire(std::move(args), spec.id);
  objects_[ret].owned = true;
  auto ref = owned_ref(ret);
  // Sent under mutex_ so that calls from this process leave in submission order, and
  // queued calls are flushed (in handle) before any later call is sent.
  send_call(actor_slot(actor), std::move(spec));
  return ref;
}

actor_id core_worker::find_named_actor(std::string_view name, std::string_view class_type) {
  return head_.find_named_actor(name, class_type);
}

void core_worker::kill_actor(const actor_id& actor) {
  {
    std::lock_guard lock(mutex_);
    check_running();
    auto& a = actors_[actor];
    a.subscribed = true;  // nothing more to learn: it is dead from here on
    if (a.state != protocol::actor_state::dead) {
      a.state = protocol::actor_state::dead;
      a.fail = make_failure(detail::failure_kind::actor_died, error_code::unavailable,
                            "actor " + actor.hex() + " was killed by celer::kill");
      fail_actor_calls(a, actor);
    }
  }
  (void)net_.send(where_.head, protocol::kill_actor{actor, "killed by celer::kill"});
}

protocol::resource_reply core_worker::query_resources() {
  return requests_.ask<protocol::resource_reply>(where_.cluster ? where_.head : where_.node,
                                                 protocol::resource_query{});
}

placement_group_id core_worker::create_placement_group(const placement_group_options& options) {
  protocol::create_placement_group m;
  m.id = placement_group_id::random();
  m.name = options.name;
  m.strategy = options.strategy;
  m.job = where_.job;
  const std::string what = "placement group " + (options.name.empty() ? m.id.short_hex() : options.name);
  if (options.bundles.empty()) {
    throw exception(error_code::invalid_argument, what + ": it has no bundles");
  }
  for (std::size_t i = 0; i < options.bundles.size(); ++i) {
    const auto& b = options.bundles[i];
    const std::string bundle = what + ", bundle " + std::to_string(i);
    protocol::bundle_spec spec;
    spec.need = checked_request(bundle, b.num_cpus, b.num_gpus, b.memory, b.resources);
    if (spec.need.amounts.empty()) {
      throw exception(error_code::invalid_argument, bundle + ": it reserves nothing");
    }
    spec.where = checked_placement(bundle, b.accelerator_type, b.gpu_memory_gb, {}, {});
    m.bundles.push_back(std::move(spec));
  }
  const auto id = m.id;
  head_.create_placement_group(std::move(m));
  return id;
}

bool core_worker::placement_group_ready(const placement_group_id& id,
                                        std::chrono::milliseconds timeout) {
  return head_.placement_group_ready(id, timeout);
}

void core_worker::remove_placement_group(const placement_group_id& id) {
  {
    std::lock_guard lock(mutex_);
    check_running();
  }
  head_.remove_placement_group(id);
}

std::vector<protocol::placement_group_info> core_worker::query_placement_groups(
  const placement_group_id& id) {
  return head_.query_placement_groups(id);
}

void core_worker::report_gpu_usage(const std::vector<int>& devices, double utilisation,
                                   std::uint64_t memory_used_bytes) {
  protocol::gpu_usage m;
  m.devices.assign(devices.begin(), devices.end());
  m.utilisation = utilisation;
  m.memory_used_bytes = memory_used_bytes;
  (void)net_.send(where_.node, std::move(m));
}

std::string core_worker::pending_reason(const object_id& id) {
  protocol::explain_placement q;
  {
    std::lock_guard lock(mutex_);
    const protocol::task_spec* waiting = nullptr;
    for (const auto& c : classes_) {
      for (const auto& spec : c.queued) {
        if (spec.return_id() == id) waiting = &spec;
      }
    }
    if (waiting == nullptr) return {};  // running, done, or not a task of this process
    q.need = waiting->resources;
    q.where = waiting->where;
  }
  auto why = head_.explain_placement(std::move(q));
  return why.empty() ? "waits for a worker: some node has room for it, and its lease request "
                       "is on its way there"
                     : why;
}

std::string core_worker::pending_reason(const actor_id& actor) {
  {
    std::lock_guard lock(mutex_);
    auto it = actors_.find(actor);
    if (it != actors_.end() && it->second.state != protocol::actor_state::pending) return {};
  }
  protocol::explain_placement q;
  q.actor = actor;
  return head_.explain_placement(std::move(q));
}

protocol::status_reply core_worker::query_status() {
  return head_.query_status();
}

protocol::store_counters core_worker::query_store_stats() {
  return store_.query_stats();
}

void core_worker::attach_node(address node, node_id id) {
  std::lock_guard lock(mutex_);
  where_.node = node;
  where_.this_node = id;
  store_.attach_node(std::move(node), id);
}

void core_worker::handle(protocol::message& m) {
  // Replies to the head and store clients' requests complete them without mutex_.
  if (requests_.complete(m)) return;
  std::lock_guard lock(mutex_);
  std::visit(
    [&](auto& msg) {
      using T = std::decay_t<decltype(msg)>;
      if constexpr (std::is_same_v<T, protocol::task_result>) {
        auto it = call_actor_.find(msg.task);
        if (it != call_actor_.end()) {
          auto a = actors_.find(it->second);
          if (a != actors_.end()) {
            auto& actor = a->second;
            actor.in_flight.erase(msg.task);
            if (!actor.unanswered.empty()) {
              // Answers come in order unless calls run concurrently: the front, mostly.
              auto u = std::find_if(actor.unanswered.begin(), actor.unanswered.end(),
                                    [&](const protocol::task_spec& s) { return s.id == msg.task; });
              if (u != actor.unanswered.end()) actor.unanswered.erase(u);
              actor.resent.erase(msg.task);
            }
          }
          call_actor_.erase(it);
        }
        for (auto& v : msg.returns) fill(std::move(v));
        if (auto r = running_.find(msg.task); r != running_.end()) {
          const worker_id w = r->second.worker;
          const bool counted = r->second.may_block;
          // Learn: a function whose task waited never runs pipelined again.
          auto [known, first] = never_blocks_.try_emplace(r->second.function, !msg.blocked);
          if (!first && msg.blocked) known->second = false;
          running_.erase(r);
          if (auto l = leases_.find(w); l != leases_.end()) {
            if (counted && l->second.may_block > 0) --l->second.may_block;
            std::erase(l->second.running, msg.task);
            pump(l->second.cls);
            if (idle(l->second)) {
              l->second.idle_since = std::chrono::steady_clock::now();
              lease_cv_.notify_one();
            }
          }
        }
      } else if constexpr (std::is_same_v<T, protocol::lease_reply>) {
        on_lease_reply(msg);
      } else if constexpr (std::is_same_v<T, protocol::worker_died>) {
        drop_lease(msg.worker, detail::failure_kind::worker_died, msg.reason);
      } else if constexpr (std::is_same_v<T, protocol::node_died>) {
        std::vector<worker_id> lost;
        for (const auto& [w, l] : leases_) {
          if (l.node == msg.node) lost.push_back(w);
        }
        for (const auto& w : lost) drop_lease(w, detail::failure_kind::node_died, msg.reason);
        if (msg.node == where_.this_node) node_dead_ = true;
        // A lease request may have been waiting on that node: ask again (a late grant from
        // elsewhere is returned unused).
        lease_requests_.clear();
        for (std::size_t i = 0; i < classes_.size(); ++i) {
          classes_[i].requests = 0;
          pump(i);
        }
      } else if constexpr (std::is_same_v<T, protocol::object_reply>) {
        fill(std::move(msg.object));
      } else if constexpr (std::is_same_v<T, protocol::object_copied>) {
        on_copied(msg);
      } else if constexpr (std::is_same_v<T, protocol::get_object>) {
        auto it = objects_.find(msg.id);
        if (it == objects_.end()) {
          protocol::object_payload v;
          v.id = msg.id;
          v.fail = make_failure(detail::failure_kind::object_lost, error_code::not_found,
                                "object " + msg.id.hex() + " is not known to its owner");
          (void)net_.send(msg.requester, protocol::object_reply{std::move(v)});
        } else if (it->second.ready) {
          (void)net_.send(msg.requester, protocol::object_reply{it->second.value});
        } else {
          it->second.remote_waiters.push_back(msg.requester);
        }
      } else if constexpr (std::is_same_v<T, protocol::actor_update>) {
        auto& a = actors_[msg.actor];
        a.subscribed = true;
        if (a.state == protocol::actor_state::dead) return;
        a.max_task_retries = msg.max_task_retries;
        if (msg.state == protocol::actor_state::restarting) {
          if (a.state == protocol::actor_state::alive) {
            a.state = protocol::actor_state::restarting;
            a.worker = {};
            a.fail = msg.fail;
            requeue_actor_calls(a, msg.actor);
          }
          a.state = protocol::actor_state::restarting;
        } else if (msg.state == protocol::actor_state::alive) {
          a.state = protocol::actor_state::alive;
          a.worker = msg.worker;
          auto queued = std::move(a.queued);
          a.queued.clear();
          for (auto& spec : queued) send_call(a, std::move(spec));
        } else if (msg.state == protocol::actor_state::dead) {
          a.state = protocol::actor_state::dead;
          a.fail = msg.fail;
          fail_actor_calls(a, msg.actor);
        }
      }
    },
    m);
}

void core_worker::stop(const std::string& reason, std::optional<error_code> code) {
  {
    // Handles that outlive the core stop reaching it (taken before mutex_, the order
    // release_hold takes them in).
    std::lock_guard g(link_->m);
    link_->core = nullptr;
  }
  store_.stop();
  std::lock_guard lock(mutex_);
  if (!stopped_) {
    stopped_ = true;
    stop_reason_ = reason;
    stop_code_ = code;
  }
  for (const auto& [w, l] : leases_) {
    (void)net_.send(l.node_addr, protocol::return_lease{w, l.request});
  }
  leases_.clear();
  cancel_requests(std::nullopt);
  lease_cv_.notify_all();
  requests_.stop(stop_reason_, stop_code_);
  ready_cv_.notify_all();
}

} // namespace celer
