#include "core/reference_table.hpp"

#include "config/knobs.hpp"
#include "core/worker_context.hpp"
#include "log.hpp"

#include <algorithm>
#include <chrono>

namespace celer {

const protocol::object_payload& reference_table::payload_box::empty() {
  static const protocol::object_payload none;
  return none;
}

reference_table::reference_table(transport& net, address self, store_client& store,
                                 head_client* head)
  : net_(net), self_(std::move(self)), store_(store), head_(head),
    link_(std::make_shared<link>()) {
  link_->table = this;
}

reference_table::~reference_table() {
  std::lock_guard g(link_->m);
  link_->table = nullptr;
}

void reference_table::check_running() const {
  std::lock_guard lock(mutex_);
  check_running_locked();
}

void reference_table::check_running_locked() const {
  if (stop_.stopped()) throw exception(stop_.code_or(error_code::failed_precondition), stop_.message());
}

std::vector<protocol::task_arg> reference_table::to_wire(std::vector<detail::arg_spec> args,
                                                         const task_id& task) {
  std::vector<protocol::task_arg> out;
  out.reserve(args.size());
  for (auto& a : args) {
    protocol::task_arg t;
    t.is_ref = a.is_ref;
    t.ref = a.ref;
    t.owner = std::move(a.owner);
    t.value = std::move(a.value);
    if (t.is_ref && t.owner == self_) {
      // An object this process owns and already holds travels inline: the worker need
      // not ask for it (unless it is in the object store: the worker maps it there).
      auto it = objects_.find(t.ref);
      if (it != objects_.end() && it->second.ready && it->second.value->ok &&
          !it->second.value->stored) {
        t.is_ref = false;
        t.value = it->second.value->payload;
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

object_ref<void> reference_table::submit(protocol::task_spec& spec,
                                         std::vector<detail::arg_spec> args,
                                         std::vector<object_ref<void>>* all) {
  if (spec.num_returns == 0 || spec.num_returns > protocol::task_spec::max_returns) {
    throw exception(error_code::invalid_argument,
                    spec.function + ": a call returns 1 to " +
                      std::to_string(protocol::task_spec::max_returns) + " objects, not " +
                      std::to_string(spec.num_returns));
  }
  const object_id ret = spec.return_id();
  std::lock_guard lock(mutex_);
  check_running_locked();
  spec.args = to_wire(std::move(args), spec.id);
  for (std::uint32_t i = 0; i < spec.num_returns; ++i) {
    auto& e = objects_[spec.return_id(i)];
    e.owned = true;
    e.durable = spec.durable;
    if (all != nullptr) all->push_back(owned_ref(spec.return_id(i)));
  }
  if (spec.num_returns > 1) several_returns_[spec.id] = spec.num_returns;
  return owned_ref(ret);
}

std::vector<protocol::task_arg> reference_table::creation_args(std::vector<detail::arg_spec> args) {
  std::lock_guard lock(mutex_);
  check_running_locked();
  return to_wire(std::move(args), task_id{});
}

object_ref<void> reference_table::put(protocol::object_payload value, bool durable) {
  const object_id id = value.id;
  std::lock_guard lock(mutex_);
  check_running_locked();
  auto& e = objects_[id];
  e.ready = true;
  e.owned = true;
  e.put = true;
  e.durable = durable;
  e.value = std::move(value);
  return owned_ref(id);
}

object_ref<void> reference_table::put(const object_id& id, std::string payload) {
  std::lock_guard lock(mutex_);
  check_running_locked();
  auto& e = objects_[id];
  e.ready = true;
  e.owned = true;
  e.put = true;
  auto& v = e.value.edit();
  v.id = id;
  v.ok = true;
  static_cast<std::string&>(v.payload) = std::move(payload);
  return owned_ref(id);
}

object_ref<void> reference_table::expect(const object_id& id) {
  std::lock_guard lock(mutex_);
  check_running_locked();
  objects_[id].owned = true;
  return owned_ref(id);
}

object_ref<void> reference_table::owned_ref(const object_id& id) {
  auto& e = objects_[id];
  ++e.holders;
  std::weak_ptr<link> weak = link_;
  return object_ref<void>(id, self_,
                          std::shared_ptr<const void>(link_.get(), [weak, id](const void*) {
                            if (auto l = weak.lock()) {
                              std::lock_guard g(l->m);
                              if (l->table != nullptr) l->table->release_hold(id);
                            }
                          }));
}

void reference_table::escaped(const object_id& id) {
  std::lock_guard lock(mutex_);
  if (auto it = objects_.find(id); it != objects_.end()) it->second.escaped = true;
}

void reference_table::release_hold(const object_id& id) {
  std::lock_guard lock(mutex_);
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  --it->second.holders;
  maybe_free(id);
}

void reference_table::maybe_free(const object_id& id) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  auto& e = it->second;
  if (!e.owned || e.escaped || e.holders > 0 || e.task_uses > 0) return;
  if (!e.ready && !e.dormant) return;  // its result is still to come
  if (e.value->stored) {
    (void)net_.send(e.value->node_addr, protocol::store_free{{id}});
    if (e.others) {
      for (const auto& [node, at] : e.others->copies) (void)net_.send(at, protocol::store_free{{id}});
    }
  }
  // Its lineage's arguments may go too (erasing other entries leaves `it` valid).
  if (e.made) drop_lineage(e);
  objects_.erase(it);
}

void reference_table::on_copied(const protocol::object_copied& m) {
  std::lock_guard lock(mutex_);
  auto it = objects_.find(m.id);
  if (it == objects_.end() || !it->second.owned) {
    // Freed before the news arrived: the copy goes too.
    (void)net_.send(m.node_addr, protocol::store_free{{m.id}});
    return;
  }
  auto& e = it->second;
  if (e.value->stored && e.value->node == m.node) return;  // its first copy
  auto& copies = e.others_made().copies;
  const auto same = [&](const auto& c) { return c.first == m.node; };
  if (std::find_if(copies.begin(), copies.end(), same) == copies.end()) {
    copies.emplace_back(m.node, m.node_addr);
  }
}

std::vector<protocol::node_bytes> reference_table::locality_of(const std::vector<protocol::task_arg>& args) const {
  std::vector<protocol::node_bytes> out;
  std::lock_guard lock(mutex_);
  for (const auto& a : args) {
    if (!a.is_ref) continue;
    const auto it = objects_.find(a.ref);
    if (it == objects_.end() || !it->second.ready || !it->second.value->stored) continue;
    const auto& v = *it->second.value;
    auto same = std::find_if(out.begin(), out.end(), [&](const auto& n) { return n.node == v.node; });
    if (same == out.end()) {
      out.push_back({v.node, v.size});
    } else {
      same->bytes += v.size;
    }
  }
  return out;
}

std::size_t reference_table::owned_objects() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
    std::count_if(objects_.begin(), objects_.end(), [](const auto& kv) { return kv.second.owned; }));
}

std::size_t reference_table::tasks_holding_args() const {
  std::lock_guard lock(mutex_);
  return task_args_.size();
}

bool reference_table::ready(const object_id& id) const {
  std::lock_guard lock(mutex_);
  auto it = objects_.find(id);
  return it != objects_.end() && it->second.ready;
}

std::size_t reference_table::lineages() const {
  std::lock_guard lock(mutex_);
  return lineage_.count();
}

std::size_t reference_table::lineage_bytes() const {
  std::lock_guard lock(mutex_);
  return lineage_.bytes();
}

std::size_t reference_table::rebuilt() const {
  std::lock_guard lock(mutex_);
  return lineage_.rebuilt();
}

std::size_t reference_table::blocked() const {
  std::lock_guard lock(mutex_);
  return blocked_;
}

std::size_t reference_table::awaiting_node_news() const {
  std::lock_guard lock(mutex_);
  return awaiting_node_news_;
}

std::size_t reference_table::prepare(const std::vector<object_ref<void>>& refs, waiter& w) {
  std::size_t ready = 0;
  for (const auto& r : refs) {
    auto [it, inserted] = objects_.try_emplace(r.id());
    auto& e = it->second;
    const bool owned = r.owner() == self_ || r.owner().nil();
    if (inserted && owned) {
      e.ready = true;
      e.value.edit().id = r.id();
      e.value.edit().fail = protocol::failure_info::make(
        detail::failure_kind::object_lost, error_code::not_found,
        "object " + r.id().hex() + " is not known to its owner: it was never created here");
    } else if (!owned && !e.ready && !e.fetch_sent) {
      e.fetch_sent = true;
      if (!net_.send(r.owner(), protocol::get_object{r.id(), self_})) {
        e.ready = true;
        e.value.edit().id = r.id();
        e.value.edit().fail = protocol::failure_info::make(
          detail::failure_kind::object_lost, error_code::unavailable,
          "object " + r.id().hex() + " is lost: its owner is unreachable");
      }
    }
    if (e.ready) {
      ++ready;
    } else {
      e.waiters.add(&w);
    }
  }
  return ready;
}

template <class Done>
bool reference_table::block_on(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                               timeout_t timeout, Done done) {
  if (done()) return true;
  // A worker blocked in get lends its CPUs back to the node so that the tasks it waits
  // for can run (otherwise nested tasks deadlock once every CPU is held by a waiter).
  worker_context* ctx = current_worker_context();
  if (ctx != nullptr) {
    ctx->blocked = true;
    (void)net_.send(ctx->node, protocol::worker_blocked{ctx->worker});
    if (ctx->on_block) ctx->on_block(true);
  }
  auto pred = [&] { return stop_.stopped() || done(); };
  before_wait();
  ++blocked_;
  if (timeout) {
    cv.wait_for(lock, *timeout, pred);
  } else {
    cv.wait(lock, pred);
  }
  --blocked_;
  if (ctx != nullptr) {
    if (ctx->on_block) ctx->on_block(false);
    (void)net_.send(ctx->node, protocol::worker_unblocked{ctx->worker});
  }
  return done();
}

bool reference_table::block_until(std::unique_lock<std::mutex>& lock, waiter& w,
                                  timeout_t timeout) {
  if (w.needed == 0) return true;
  // A driver's thread (no worker context: a worker's get lends its CPUs instead) takes its
  // reply off the socket itself, when the transport lends it the seat.
  // Not for a look that hardly waits (a wait with a zero timeout, polled in a loop): the
  // seat's hand-over would cost more than it saves.
  if (seat_.receive_until && !stop_.stopped() && current_worker_context() == nullptr &&
      (!timeout || *timeout >= std::chrono::milliseconds(1))) {
    const auto start = std::chrono::steady_clock::now();
    const bool bounded = timeout && *timeout < std::chrono::hours(24 * 365);
    const auto until = bounded ? start + *timeout : std::chrono::steady_clock::time_point::max();
    w.receiving = std::this_thread::get_id();
    lock.unlock();
    const bool received = seat_.receive_until(
      [&] {
        std::lock_guard look(mutex_);
        return stop_.stopped() || w.needed == 0;
      },
      until);
    lock.lock();
    w.receiving = {};
    if (w.needed == 0 || stop_.stopped()) return w.needed == 0;
    if (received) {
      // It gave the seat back early (the transport stops): wait out the rest as before.
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) return false;
      if (bounded) timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now);
    }
  }
  return block_on(lock, w.cv, timeout, [&] { return w.needed == 0; });
}

bool reference_table::when_ready(const object_ref<void>& ref, std::function<void()> then) {
  std::lock_guard lock(mutex_);
  if (stop_.stopped()) return false;
  if (auto it = objects_.find(ref.id()); it != objects_.end() && it->second.ready) return false;
  auto w = std::make_unique<waiter>();
  if (prepare({ref}, *w) > 0) return false;  // known to be lost, or unreachable: ready now
  w->needed = 1;
  w->then = std::move(then);
  async_waiters_.emplace(w.get(), std::move(w));
  return true;
}

void reference_table::wake(waiter& w) {
  if (w.then) {
    auto then = std::move(w.then);
    w.then = nullptr;
    async_waiters_.erase(&w);  // its object forgets it (fill clears, stop removes)
    then();
    return;
  }
  if (w.receiving == std::thread::id{}) {
    w.cv.notify_one();
  } else if (w.receiving != std::this_thread::get_id()) {
    seat_.wake();
  }
}

void reference_table::await_node_news(std::unique_lock<std::mutex>& lock,
                                      const std::vector<std::pair<object_id, node_id>>& unheard,
                                      timeout_t timeout) {
  const auto& k = knobs();
  const std::chrono::nanoseconds news_within =
    std::chrono::milliseconds(std::max(0, k.node_timeout_ms) + 2 * std::max(0, k.heartbeat_ms));
  const auto limit = timeout ? std::min(*timeout, news_within) : news_within;
  ++awaiting_node_news_;
  (void)block_on(lock, node_news_, limit, [&] {
    return std::none_of(unheard.begin(), unheard.end(), [&](const auto& u) {
      auto it = objects_.find(u.first);
      return it != objects_.end() && it->second.ready && it->second.value->ok &&
             it->second.value->stored && it->second.value->node == u.second;
    });
  });
  --awaiting_node_news_;
}

void reference_table::forget(const std::vector<object_ref<void>>& refs, waiter& w) {
  // A filled object forgot its waiters; an unready one is never freed, so it is still here.
  for (const auto& r : refs) {
    if (auto it = objects_.find(r.id()); it != objects_.end() && !it->second.ready) {
      it->second.waiters.remove(&w);
    }
  }
}

std::vector<detail::fetched> reference_table::fetch(const std::vector<object_ref<void>>& refs,
                                                    timeout_t timeout) {
  std::vector<node_id> read_at;
  auto out = fetch_once(refs, timeout, read_at);
  const auto at = [&](std::size_t i) { return i < read_at.size() ? read_at[i] : node_id{}; };
  // A stored object whose node died while it was being read. The head's word that the
  // node died is awaited first (a read can fail before the head has declared it dead).
  // Owned: by then this table reads a copy another node pulled, makes the object again, or
  // has marked it lost with its origin. Borrowed: where its owner said it was is stale, so
  // the owner is asked again; it reads a copy, makes the object again (the get waits), or
  // says why not. Read those again.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::size_t> again;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!out[i].ok && out[i].fail.kind == detail::failure_kind::object_lost) again.push_back(i);
    }
    if (again.empty()) break;
    {
      std::unique_lock lock(mutex_);
      // Those still where their read failed, as far as this process knows.
      std::vector<std::pair<object_id, node_id>> unheard;
      for (auto i : again) {
        auto it = objects_.find(refs[i].id());
        if (it == objects_.end()) continue;
        const auto& e = it->second;
        // A durable one's node keeps it on disk: nothing here changes when that node dies.
        if (e.ready && e.value->ok && e.value->stored && !e.durable && e.value->node == at(i)) {
          unheard.emplace_back(it->first, at(i));
        }
      }
      if (!unheard.empty()) await_node_news(lock, unheard, timeout);
      std::erase_if(again, [&](std::size_t i) {
        auto it = objects_.find(refs[i].id());
        if (it == objects_.end()) return true;
        auto& e = it->second;
        if (!e.ready || !e.value->ok || !e.value->stored) return false;  // being made again, or lost
        // Owned: read again where it is now (a copy); the failure stands if nothing moved it.
        if (refs[i].owner() == self_ || refs[i].owner().nil()) return e.value->node == at(i);
        e.ready = false;
        e.fetch_sent = false;
        e.value.reset();
        return false;
      });
    }
    if (again.empty()) break;
    std::vector<object_ref<void>> sub;
    sub.reserve(again.size());
    for (auto i : again) sub.push_back(refs[i]);
    std::vector<node_id> more_at;
    auto more = fetch_once(sub, timeout, more_at);
    if (read_at.empty()) read_at.assign(refs.size(), node_id{});
    for (std::size_t k = 0; k < again.size(); ++k) {
      out[again[k]] = std::move(more[k]);
      read_at[again[k]] = k < more_at.size() ? more_at[k] : node_id{};
    }
  }
  return out;
}

std::vector<detail::fetched> reference_table::fetch_once(const std::vector<object_ref<void>>& refs,
                                                         timeout_t timeout,
                                                         std::vector<node_id>& read_at) {
  std::unique_lock lock(mutex_);
  check_running_locked();
  // All ready already (a get of a finished result, mostly): no waiter to set up.
  const bool ready_now = std::all_of(refs.begin(), refs.end(), [&](const object_ref<void>& r) {
    auto it = objects_.find(r.id());
    return it != objects_.end() && it->second.ready;
  });
  if (!ready_now) {
    waiter w;
    w.needed = refs.size() - prepare(refs, w);
    if (!block_until(lock, w, timeout)) {
      forget(refs, w);
      check_running_locked();
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
  }
  std::vector<detail::fetched> out;
  out.reserve(refs.size());
  std::vector<std::pair<std::size_t, protocol::object_payload>> stored;
  read_at.clear();  // filled only when something is stored: no allocation for inline values
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const auto& v = *objects_[refs[i].id()].value;
    detail::fetched f;
    f.ok = v.ok;
    if (v.ok && v.stored) {
      if (read_at.empty()) read_at.assign(refs.size(), node_id{});
      read_at[i] = v.node;
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
    if (out[i].ok || head_ == nullptr) continue;
    // Its node is gone: a durable copy may live on (on a node agent restarted on the same
    // machine, under a new id). The head's directory knows.
    protocol::object_location at;
    try {
      at = head_->locate_object(v.id);
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
    if (auto e = objects_.find(v.id); e != objects_.end() && e->second.value->stored) {
      e->second.value.edit().node = at.node;
      e->second.value.edit().node_addr = at.node_addr;
    }
  }
  return out;
}

std::vector<std::size_t> reference_table::wait_ready(const std::vector<object_ref<void>>& refs,
                                                     std::size_t num_returns,
                                                     timeout_t timeout) {
  if (num_returns > refs.size()) {
    throw exception(error_code::invalid_argument,
                    "celer::wait: num_returns (" + std::to_string(num_returns) +
                      ") exceeds the number of refs (" + std::to_string(refs.size()) + ")");
  }
  std::unique_lock lock(mutex_);
  check_running_locked();
  std::vector<std::size_t> out;
  {
    // Enough are ready already (a loop of wait(..., 1) over a stream of results, mostly):
    // one pass, and no waiter to register and take back.
    bool all_known = true;
    for (std::size_t i = 0; i < refs.size() && all_known; ++i) {
      auto it = objects_.find(refs[i].id());
      all_known = it != objects_.end();
      if (all_known && it->second.ready) out.push_back(i);
    }
    if (all_known && out.size() >= num_returns) return out;
    out.clear();
  }
  waiter w;
  const std::size_t ready = prepare(refs, w);
  w.needed = num_returns > ready ? num_returns - ready : 0;
  block_until(lock, w, timeout);
  // One pass: the ready ones are the answer, the others forget this waiter (before the
  // stop's error: w dies with this frame).
  for (std::size_t i = 0; i < refs.size(); ++i) {
    auto it = objects_.find(refs[i].id());
    if (it == objects_.end()) continue;
    if (it->second.ready) {
      out.push_back(i);
    } else {
      it->second.waiters.remove(&w);
    }
  }
  check_running_locked();
  return out;
}

void reference_table::release_args(const task_id& task) {
  auto t = task_args_.find(task);
  if (t == task_args_.end()) return;
  auto used = std::move(t->second);
  task_args_.erase(t);
  for (const auto& arg : used) {
    if (auto a = objects_.find(arg); a != objects_.end()) --a->second.task_uses;
    maybe_free(arg);
  }
}

void reference_table::fill(protocol::object_payload value) {
  std::lock_guard lock(mutex_);
  fill_locked(std::move(value));
}

void reference_table::fill_locked(protocol::object_payload value) {
  const object_id id = value.id;
  auto it = objects_.find(id);
  if (it == objects_.end() || it->second.ready) {
    // Unknown (no one held it any more, so it was freed) or already filled: stale. A
    // stored copy made for it is freed, unless it is the copy kept (a duplicate made on
    // the same node is the same object there) or one another reader pulled.
    if (value.stored) {
      bool kept = false;
      if (it != objects_.end()) {
        const auto& e = it->second;
        kept = e.value->stored && e.value->node == value.node;
        if (e.others) {
          for (const auto& c : e.others->copies) kept = kept || c.first == value.node;
        }
      }
      if (!kept) (void)net_.send(value.node_addr, protocol::store_free{{id}});
    }
    return;
  }
  auto& e = it->second;
  if (e.others) {
    for (const auto& w : e.others->remote_waiters) (void)net_.send(w, protocol::object_reply{value});
    e.others->remote_waiters.clear();
  }
  e.value = std::move(value);
  e.ready = true;
  e.dormant = false;
  e.waiters.for_each([this](waiter* w) {
    if (w->needed > 0 && --w->needed == 0) wake(*w);
  });
  e.waiters.clear();
  maybe_free(id);
}

void reference_table::on_get_object(const protocol::get_object& m) {
  answer_get_object(m);
  run_rebuilds();
}

void reference_table::answer_get_object(const protocol::get_object& m) {
  std::lock_guard lock(mutex_);
  auto it = objects_.find(m.id);
  if (it == objects_.end()) {
    protocol::object_payload v;
    v.id = m.id;
    v.fail = protocol::failure_info::make(detail::failure_kind::object_lost, error_code::not_found,
                                          "object " + m.id.hex() + " is not known to its owner");
    (void)net_.send(m.requester, protocol::object_reply{std::move(v)});
  } else if (it->second.ready) {
    (void)net_.send(m.requester, protocol::object_reply{*it->second.value});
  } else {
    it->second.others_made().remote_waiters.push_back(m.requester);
    if (it->second.dormant) {
      // A lost lineage argument that a task runs again with: made again now.
      start_rebuild(m.id, it->second, "it was lost with its node, and task " +
                                         it->second.made->function + " needs it again");
    }
  }
}

void reference_table::stop(const std::string& reason, std::optional<error_code> code) {
  {
    // Handles that outlive the core stop reaching it (taken before mutex_, the order
    // release_hold takes them in).
    std::lock_guard g(link_->m);
    link_->table = nullptr;
  }
  std::lock_guard lock(mutex_);
  (void)stop_.stop(reason, code);  // the first stop's reason stands
  std::vector<waiter*> async;
  for (auto& [id, e] : objects_) {
    e.waiters.for_each([&](waiter* w) {
      if (w->then) {
        async.push_back(w);
      } else {
        wake(*w);
      }
    });
    for (waiter* w : async) e.waiters.remove(w);
    for (waiter* w : async) wake(*w);
    async.clear();
  }
  node_news_.notify_all();
}

} // namespace celer
