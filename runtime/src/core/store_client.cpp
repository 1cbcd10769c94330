#include "core/store_client.hpp"

#include "config/knobs.hpp"
#include "node/arena_handout.hpp"

#include <celer/store/shm_arena.hpp>

#include <algorithm>
#include <chrono>

namespace celer {

store_client::store_client(transport& net, request_table& requests, endpoints where,
                           copied_here on_copy)
  : net_(net), requests_(requests), where_(std::move(where)), on_copy_(std::move(on_copy)),
    link_(std::make_shared<link>()) {
  link_->client = this;
}

store_client::~store_client() { stop(); }

void store_client::stop() {
  {
    std::lock_guard g(link_->m);
    link_->client = nullptr;
  }
  {
    std::lock_guard lock(node_mutex_);
    stopped_ = true;
  }
  attached_.notify_all();
}

void store_client::attach_node(address node, node_id id) {
  {
    std::lock_guard lock(node_mutex_);
    where_.node = std::move(node);
    where_.this_node = id;
  }
  attached_.notify_all();
}

void store_client::on_node_died(const node_id& id) {
  address node;
  {
    std::lock_guard lock(node_mutex_);
    if (id != where_.this_node) return;
    if (std::find(dead_.begin(), dead_.end(), id) == dead_.end()) dead_.push_back(id);
    node = where_.node;
  }
  requests_.fail_sent_to(node, error_code::unavailable,
                         "this process's node " + id.short_hex() + " died");
}

std::pair<address, node_id> store_client::local() const {
  std::lock_guard lock(node_mutex_);
  return {where_.node, where_.this_node};
}

bool store_client::attached_died(const node_id& id) const {
  std::lock_guard lock(node_mutex_);
  return std::find(dead_.begin(), dead_.end(), id) != dead_.end();
}

std::optional<std::pair<address, node_id>> store_client::live_local() const {
  std::unique_lock lock(node_mutex_);
  const auto alive = [&] {
    return std::find(dead_.begin(), dead_.end(), where_.this_node) == dead_.end();
  };
  if (!attached_.wait_for(lock, std::chrono::milliseconds(knobs().request_timeout_ms),
                          [&] { return stopped_ || alive(); }) ||
      !alive()) {
    return std::nullopt;
  }
  return std::pair{where_.node, where_.this_node};
}

protocol::object_payload store_client::store_value(const object_id& id, std::size_t size,
                                                   unsigned char first, bool durable,
                                                   const address& owner, const job_id& job,
                                                   const std::function<void(char*)>& write) {
  // The node may die under the write (its store with it): the write starts again through
  // the next node attached.
  for (int attempt = 0;; ++attempt) {
    const auto at = live_local();
    if (!at) {
      throw exception(error_code::unavailable,
                      "celer::put: this process's node died, and no other was attached within " +
                        std::to_string(knobs().request_timeout_ms) + " ms");
    }
    try {
      return store_value_at(at->first, at->second, id, size, first, durable, owner, job, write, attempt > 0);
    } catch (const exception&) {
      if (attempt >= 2 || !attached_died(at->second)) throw;
    }
  }
}

protocol::object_payload store_client::store_value_at(const address& node, const node_id& here,
                                                      const object_id& id, std::size_t size,
                                                      unsigned char first, bool durable,
                                                      const address& owner, const job_id& job,
                                                      const std::function<void(char*)>& write, bool again) {
  protocol::object_payload v;
  v.id = id;
  protocol::store_create c;
  c.id = id;
  c.size = size;
  c.lead = protocol::lead_for(first);
  c.owner = owner;
  c.job = job;
  c.durable = durable;
  c.arena_known = known_arena(node);
  const auto lead = c.lead;
  auto created = requests_.ask<protocol::store_reply>(node, protocol::store_create(c));
  if (!created.ok && again && created.fail.code == error_code::already_exists) {
    // An earlier attempt of this write reached this store: its reply was lost with a node
    // that died, and the node now asked keeps that copy (a durable one, recovered from the
    // same disk by a node that came back). The copy goes, and the value is written again.
    (void)net_.send(node, protocol::store_release{id, where_.self, /*abandon=*/true});
    created = requests_.ask<protocol::store_reply>(node, std::move(c));
  }
  if (!created.ok) {
    v.fail = created.fail;
    return v;
  }
  // Readers map the store read-only; the writer gets a writable view of its object alone,
  // unmapped once it is written.
  std::shared_ptr<store::shm_segment> seg;
  try {
    seg = segment(node, created);
  } catch (...) {
    (void)net_.send(node, protocol::store_release{id, where_.self, /*abandon=*/true});
    throw;
  }
  auto view = seg->map_writable(created.offset, size);
  if (!view) {
    (void)net_.send(node, protocol::store_release{id, where_.self, /*abandon=*/true});
    v.fail = protocol::failure_info::make(detail::failure_kind::task_error, view.error().code(),
                                          view.error().message());
    return v;
  }
  try {
    write(reinterpret_cast<char*>(view->data()));
  } catch (...) {
    (void)net_.send(node, protocol::store_release{id, where_.self, /*abandon=*/true});
    throw;
  }
  protocol::store_seal seal;
  seal.id = id;
  auto sealed = requests_.ask<protocol::store_reply>(node, std::move(seal));
  if (!sealed.ok) {
    v.fail = sealed.fail;
    return v;
  }
  v.ok = true;
  v.stored = true;
  v.node = here;
  v.node_addr = node;
  v.size = size;
  v.lead = lead;
  return v;
}

std::uint64_t store_client::known_arena(const address& node) {
  std::lock_guard lock(mappings_mutex_);
  auto it = known_arena_.find(node.id);
  return it == known_arena_.end() ? 0 : it->second;
}

std::shared_ptr<store::shm_segment> store_client::segment(const address& node,
                                                          const protocol::store_reply& r) {
  (void)mapping(node, r);
  std::lock_guard lock(mappings_mutex_);
  return segments_.at(node.id.hex() + "/" + std::to_string(r.arena));
}

std::shared_ptr<const void> store_client::mapping(const address& node, const protocol::store_reply& r) {
  const std::string key = node.id.hex() + "/" + std::to_string(r.arena);
  std::lock_guard lock(mappings_mutex_);
  auto& m = mappings_[key];
  if (!m) {
    // The first reply naming this arena carries a ticket for its fd (read-write: this
    // process's job writes its own objects there; the base is mapped read-only all the same).
    auto fd = fetch_arena_fd(r.socket, r.arena, r.ticket,
                             std::chrono::milliseconds(knobs().request_timeout_ms));
    if (!fd) {
      mappings_.erase(key);
      throw exception(fd.error().code(), "the object store's arena " + std::to_string(r.arena) +
                                           ": " + fd.error().message());
    }
    auto seg = store::shm_segment::adopt(*fd, r.capacity, store::shm_access::read_only);
    if (!seg) {
      mappings_.erase(key);
      throw exception(seg.error().code(), seg.error().message());
    }
    auto owned = std::make_shared<store::shm_segment>(std::move(*seg));
    segments_[key] = owned;
    known_arena_[node.id] = r.arena;
    // The handle's pointer is the base of the mapping; it owns the segment.
    m = std::shared_ptr<const void>(owned, owned->base());
  }
  return m;
}

detail::fetched store_client::map_stored(const protocol::object_payload& v, const address& owner) {
  auto p = start_map(v, owner);
  return finish_map(p);
}

store_client::pending_map store_client::start_map(const protocol::object_payload& v,
                                                  const address& owner) {
  pending_map p;
  p.object = v.id;
  p.owner = owner;
  p.source = v;
  if (auto at = live_local()) {
    std::tie(p.node, p.node_ident) = *at;
  } else {
    p.failed = protocol::failure_info::make(detail::failure_kind::object_lost,
                                            error_code::unavailable,
                                            "object " + v.id.hex() +
                                              " could not be read: this process's node died, "
                                              "and no other was attached")
                 .to_failure();
    return p;
  }
  protocol::store_get g;
  g.request_id = requests_.next_id();
  g.reply_to = where_.self;
  g.id = v.id;
  if (v.node != p.node_ident) g.source = v.node_addr;
  g.size = v.size;
  g.lead = v.lead;
  g.owner = owner;
  g.job = where_.job;
  g.arena_known = known_arena(p.node);
  p.request = g.request_id;
  try {
    p.reply = requests_.send_request(p.node, std::move(g), p.request);
  } catch (const exception& e) {
    p.failed = protocol::failure_info::make(detail::failure_kind::object_lost, e.code(),
                                            "object " + v.id.hex() +
                                              " could not be read from the object store: " +
                                              e.what())
                 .to_failure();
  }
  return p;
}

detail::fetched store_client::finish_map(pending_map& p) {
  detail::fetched f;
  if (p.failed) {
    f.fail = *p.failed;
    return f;
  }
  protocol::store_reply r;
  try {
    r = std::get<protocol::store_reply>(requests_.await_reply(p.reply, p.request, "store_get"));
  } catch (const exception& e) {
    // Read through a node that died: again through the next one attached (unless the
    // object was stored on that very node).
    if (attached_died(p.node_ident) && p.source.node != p.node_ident) {
      auto again = start_map(p.source, p.owner);
      if (again.node_ident != p.node_ident) return finish_map(again);
    }
    f.fail = protocol::failure_info::make(detail::failure_kind::object_lost, e.code(),
                                          "object " + p.object.hex() +
                                            " could not be read from the object store: " + e.what())
               .to_failure();
    return f;
  }
  if (!r.ok) {
    f.fail = r.fail.to_failure();
    return f;
  }
  if (r.pulled) {
    // A new copy on this node: its owner frees it with the object.
    protocol::object_copied c{p.object, p.node_ident, p.node};
    if (p.owner == where_.self) {
      on_copy_(c);
    } else {
      (void)net_.send(p.owner, std::move(c));
    }
  }
  std::shared_ptr<const void> map;
  try {
    map = mapping(p.node, r);
  } catch (const exception& e) {
    (void)net_.send(p.node, protocol::store_release{p.object, where_.self, false});
    f.fail = protocol::failure_info::make(detail::failure_kind::object_lost, e.code(),
                                          "object " + p.object.hex() +
                                            " could not be mapped: " + e.what())
               .to_failure();
    return f;
  }
  // One pin per mapping: dropped (store_release) when the last user of the bytes is gone.
  struct pinned {
    std::shared_ptr<const void> map;
    std::weak_ptr<link> client;
    object_id id;
    address node;
    ~pinned() {
      if (auto l = client.lock()) {
        std::lock_guard g(l->m);
        if (l->client != nullptr) {
          (void)l->client->net_.send(node,
                                     protocol::store_release{id, l->client->where_.self, false});
        }
      }
    }
  };
  // Filled in place: a pinned built as a temporary and copied would release the pin as the
  // temporary dies (it did until the store client's tests caught it).
  auto pin = std::make_shared<pinned>();
  pin->map = map;
  pin->client = link_;
  pin->id = p.object;
  pin->node = p.node;
  f.ok = true;
  f.mapped = static_cast<const char*>(map.get()) + r.offset;
  f.mapped_size = r.size;
  f.keep = std::shared_ptr<const void>(pin, f.mapped);
  return f;
}

protocol::store_counters store_client::query_stats() {
  return requests_.ask<protocol::store_stats_reply>(local().first, protocol::store_stats_query{})
    .stats;
}

} // namespace celer
