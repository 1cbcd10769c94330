#include "node/node_store.hpp"

#include "log.hpp"
#include "node/arena_handout.hpp"
#include "node/chunk_seal.hpp"
#include "transport/bulk_lane.hpp"

#include <celer/store/checksum.hpp>
#include <celer/store/object_store.hpp>
#include <celer/store/shm_arena.hpp>

#include <algorithm>
#include <cstring>

namespace celer {

namespace {

/// A received chunk is checksummed piece by piece as it is copied into the store, each
/// piece while it is still in the cache (a core's L2 holds a few of them).
constexpr std::size_t copy_piece_bytes = std::size_t{256} << 10;

protocol::failure_info failure_of(const error& e, detail::failure_kind kind) {
  return protocol::failure_info::make(kind, e.code(), e.message());
}

/// The store on `cfg`'s capacity and disk tier; throws celer::exception when it cannot be had.
std::unique_ptr<store::object_store> open_objects(const node_store::config& cfg) {
  auto s = store::object_store::open({cfg.capacity, cfg.dir, cfg.spill});
  if (!s) throw exception(s.error().code(), "the node's object store: " + s.error().message());
  return std::move(*s);
}

/// `cfg` with the pulls' chunk size and chunks in flight within their bounds.
node_store::config bounded(node_store::config cfg) {
  cfg.chunk_bytes = std::clamp<std::uint64_t>(cfg.chunk_bytes, 1, node_store::max_chunk_bytes);
  cfg.chunks_in_flight = std::max<std::size_t>(cfg.chunks_in_flight, 1);
  return cfg;
}

std::unique_ptr<arena_handout> start_handout(const node_store::config& cfg) {
  auto handout = arena_handout::start({.ttl = cfg.ticket_ttl});
  if (!handout) {
    throw exception(handout.error().code(), "the node's object store: " + handout.error().message());
  }
  return std::move(*handout);
}

} // namespace

// store_ is declared before the pieces that hold a reference to it, so it is opened first.
node_store::node_store(transport& net, config cfg)
  : net_(net), cfg_(bounded(std::move(cfg))), store_(open_objects(cfg_)), handout_(start_handout(cfg_)),
    clients_(*store_), server_(net, *store_, cfg_.lane), fence_(*store_),
    pull_ids_(cfg_.pull_id_seed != 0 ? cfg_.pull_id_seed
                                     : (std::uint64_t{std::random_device{}()} << 32) ^
                                         std::random_device{}()) {}

node_store::~node_store() = default;

std::chrono::steady_clock::time_point node_store::now() const {
  return cfg_.clock ? cfg_.clock() : std::chrono::steady_clock::now();
}

void node_store::reply_error(std::uint64_t request_id, const address& to, const error& e,
                             detail::failure_kind kind) {
  protocol::store_reply r;
  r.request_id = request_id;
  r.ok = false;
  r.fail = failure_of(e, kind);
  r.fail.node = cfg_.node.hex();
  (void)net_.send(to, std::move(r));
}

void node_store::on(protocol::store_create& m) {
  expire_pulls();
  auto at = store_->create(m.id, m.size, m.lead, {m.owner.id, m.job}, m.durable);
  if (!at) {
    reply_error(m.request_id, m.reply_to, at.error(), detail::failure_kind::object_lost);
    return;
  }
  clients_.pinned(m.reply_to, m.id);
  clients_.joined(m.reply_to.id, m.job);
  clients_.owns(m.owner);
  protocol::store_reply r;
  r.request_id = m.request_id;
  r.ok = true;
  r.offset = at->offset;
  r.size = at->size;
  name_arena(r, at->arena, *at->segment, m.arena_known);
  (void)net_.send(m.reply_to, std::move(r));
}

void node_store::name_arena(protocol::store_reply& r, std::uint64_t arena,
                            const store::shm_segment& segment, std::uint64_t known) {
  r.arena = arena;
  r.capacity = segment.capacity();
  if (known == arena) return;  // mapped already: nothing to hand over
  // The arena is the object's job's, and the asker is of that job (or the cluster's own):
  // the job fence checked it before any reply names the arena.
  r.ticket = handout_->issue(store_->job_of_arena(arena).value_or(unique_id{}), arena, segment.fd());
  r.socket = handout_->name();
}

void node_store::on(protocol::store_seal& m) {
  expire_pulls();
  if (!fence_.allows(m.sender_job, m.id, "seal")) return;
  auto sealed = store_->seal(m.id);
  if (!sealed) {
    // Not on disk as asked (a full disk, say): the object is dropped, and the writer told.
    clients_.unpin(m.reply_to, m.id);
    store_->free(m.id);
    reply_error(m.request_id, m.reply_to, sealed.error(), detail::failure_kind::object_lost);
    return;
  }
  clients_.unpin(m.reply_to, m.id);  // the writer's pin
  if (store_->durable(m.id)) {
    (void)net_.send(cfg_.head, protocol::durable_objects{cfg_.node, {m.id}});
  }
  protocol::store_reply r;
  r.request_id = m.request_id;
  r.ok = true;
  (void)net_.send(m.reply_to, std::move(r));
  // Readers that arrived before the seal (another process got the ref first) wait on it.
  if (auto p = pulls_.find(m.id); p != pulls_.end() && p->second.source.nil()) {
    finish_pull(m.id, nullptr);
  }
}

void node_store::answer_get(std::uint64_t request_id, const address& client, const object_id& id,
                            bool pulled, std::uint64_t arena_known) {
  auto at = store_->pin(id);
  if (!at) {
    reply_error(request_id, client, at.error(), detail::failure_kind::object_lost);
    return;
  }
  clients_.pinned(client, id);
  protocol::store_reply r;
  r.request_id = request_id;
  r.ok = true;
  r.offset = at->offset;
  r.size = at->size;
  name_arena(r, at->arena, *at->segment, arena_known);
  r.pulled = pulled;
  (void)net_.send(client, std::move(r));
}

void node_store::on(protocol::store_get& m) {
  expire_pulls();
  // A copy here (sealed, being written or being pulled) is read only by its own job. One
  // not here is pulled for the reader's job, and the node holding it checks that.
  if (!fence_.allows(m.sender_job, m.id, "read")) return;
  clients_.joined(m.reply_to.id, m.job);
  if (store_->sealed(m.id)) {
    answer_get(m.request_id, m.reply_to, m.id, false, m.arena_known);
    return;
  }
  if (auto p = pulls_.find(m.id); p != pulls_.end()) {
    // One transfer for all readers.
    p->second.waiters.push_back({m.request_id, m.reply_to, m.arena_known});
    return;
  }
  if (store_->contains(m.id) || m.source.nil() || m.source == cfg_.self) {
    if (store_->contains(m.id)) {
      // Created here and not sealed yet: its reader got the ref before its writer's seal
      // arrived. It waits for the seal.
      pulls_[m.id].waiters.push_back({m.request_id, m.reply_to, m.arena_known});
      return;
    }
    reply_error(m.request_id, m.reply_to,
                error(error_code::not_found,
                      "object " + m.id.hex() + " is not in the object store of node " +
                        cfg_.node.hex() + " (freed, or lost with a process that held it)"),
                detail::failure_kind::object_lost);
    return;
  }
  if (dead_nodes_.contains(node_id(m.source.id))) {
    reply_error(m.request_id, m.reply_to,
                error(error_code::unavailable, "object " + m.id.hex() + " was on node " +
                                                 m.source.id.hex() + ", which died"),
                detail::failure_kind::object_lost);
    return;
  }
  auto at = store_->create(m.id, m.size, m.lead, {m.owner.id, m.job}, /*durable=*/false);
  if (!at) {
    reply_error(m.request_id, m.reply_to, at.error(), detail::failure_kind::object_lost);
    return;
  }
  auto& p = pulls_[m.id];
  p.offset = at->offset;
  p.segment = store_->arena_segment(at->arena);
  p.source = m.source;
  p.size = m.size;
  p.job = m.job;
  if (cfg_.lane != nullptr) p.key = chunk_seal::new_key();
  do {
    p.request_id = pull_ids_();
  } while (p.request_id == 0);
  p.progress = now();
  p.waiters.push_back({m.request_id, m.reply_to, m.arena_known});
  CELER_LOG(debug, "store", "pulls " + m.id.short_hex() + " (" + std::to_string(m.size) +
                              " bytes) from " + m.source.endpoint);
  if (m.size == 0) {
    finish_pull(m.id, nullptr);
    return;
  }
  ask_next_chunks(m.id, p);
}

void node_store::ask_next_chunks(const object_id& id, pull& p) {
  while (p.in_flight.size() < cfg_.chunks_in_flight && p.next < p.size) {
    protocol::store_pull q;
    q.request_id = p.request_id;
    q.reply_to = cfg_.self;
    q.id = id;
    q.offset = p.next;
    q.length = static_cast<std::uint32_t>(std::min(cfg_.chunk_bytes, p.size - p.next));
    q.job = p.job;
    if (!p.key.empty()) {
      q.key = p.key;
      q.lane = cfg_.lane->endpoint();
    }
    p.next += q.length;
    p.in_flight.emplace(q.offset, q.length);
    if (!net_.send(p.source, std::move(q))) {
      const error e(error_code::unavailable, "object " + id.hex() + ": the node holding it (" +
                                               p.source.endpoint + ") is unreachable");
      finish_pull(id, &e);
      return;
    }
  }
}

void node_store::on(protocol::store_pull& m) {
  expire_pulls();
  if (!fence_.allows(m.job, m.id, "pull")) {
    server_.refuse(m);
    return;
  }
  server_.serve(m);
}

void node_store::on(protocol::store_chunk& m) {
  expire_pulls();
  auto it = pulls_.find(m.id);
  if (it == pulls_.end() || it->second.source.nil() || it->second.request_id != m.request_id) {
    // A pull that failed or expired (its late chunks), or one nobody started.
    dropped_.drop(m, "no pull of this object with this request id is in progress", now());
    return;
  }
  auto& p = it->second;
  const auto asked = p.in_flight.find(m.offset);
  if (asked == p.in_flight.end()) {
    dropped_.drop(m, "no chunk at offset " + std::to_string(m.offset) + " was asked for", now());
    return;
  }
  const std::size_t sealing = p.key.empty() ? 0 : chunk_seal::tag_bytes;
  if (m.ok && m.data.size() != asked->second + sealing) {
    dropped_.drop(m,
                  std::to_string(asked->second + sealing) + " bytes were asked for at offset " +
                    std::to_string(m.offset) + ", " + std::to_string(m.data.size()) + " came",
                  now());
    return;
  }
  // What was asked lies inside the object (ask_next_chunks), so the writes below do too:
  // straight from the frame it arrived in into the block (the puller's pin, from create,
  // keeps it where create put it).
  auto* to = reinterpret_cast<char*>(p.segment->base() + p.offset + m.offset);
  if (m.ok && sealing > 0) {
    // Opened and checked as it goes. One that does not authenticate (a peer's junk on the
    // lane, which anyone may connect to) is dropped, and the chunk stays asked for: the real
    // one, when it comes, is written over it.
    if (!chunk_seal::open(p.key, {p.request_id, m.id, m.offset}, m.data.data(), m.data.size(), to)) {
      dropped_.drop(m, "it does not authenticate under the pull's key (forged, or damaged)", now());
      return;
    }
    p.received += asked->second;
    p.in_flight.erase(asked);
    p.progress = now();
    finish_or_ask(m.id, p);
    return;
  }
  p.in_flight.erase(asked);
  p.progress = now();
  if (!m.ok) {
    const error e(m.fail.code, m.fail.message);
    finish_pull(m.id, &e);
    return;
  }
  // In clear: copied and checked as it goes; a damaged chunk fails the pull, and the
  // unsealed copy with it.
  store::running_checksum sum;
  for (std::size_t done = 0; done < m.data.size(); done += copy_piece_bytes) {
    const std::size_t n = std::min(copy_piece_bytes, m.data.size() - done);
    std::memcpy(to + done, m.data.data() + done, n);
    sum.update(to + done, n);
  }
  if (sum.digest() != m.checksum) {
    const error e(error_code::data_loss, "object " + m.id.hex() + ": a chunk from " +
                                           p.source.endpoint + " arrived damaged (checksum mismatch)");
    finish_pull(m.id, &e);
    return;
  }
  p.received += m.data.size();
  finish_or_ask(m.id, p);
}

void node_store::finish_or_ask(const object_id& id, pull& p) {
  if (p.received == p.size) {
    finish_pull(id, nullptr);
  } else {
    ask_next_chunks(id, p);
  }
}

void node_store::expire_pulls() {
  server_.release_sent();
  if (pulls_.empty() || cfg_.pull_timeout.count() <= 0) return;
  const auto t = now();
  std::vector<object_id> stuck;
  for (const auto& [id, p] : pulls_) {
    // Readers waiting for a local writer's seal are not transfers: they wait as long as it
    // writes.
    if (!p.source.nil() && t - p.progress >= cfg_.pull_timeout) stuck.push_back(id);
  }
  for (const auto& id : stuck) {
    const auto& p = pulls_.at(id);
    const error e(error_code::unavailable,
                  "object " + id.hex() + ": no chunk came from the node holding it (" +
                    p.source.endpoint + ") for " + std::to_string(cfg_.pull_timeout.count()) +
                    " ms (object_pull_timeout_ms); the pull was given up");
    CELER_LOG(warn, "store", e.message());
    finish_pull(id, &e);
  }
}

void node_store::finish_pull(const object_id& id, const error* failed) {
  auto it = pulls_.find(id);
  if (it == pulls_.end()) return;
  pull p = std::move(it->second);
  pulls_.erase(it);
  const bool transfer = !p.source.nil();
  if (failed == nullptr && transfer) {
    if (auto sealed = store_->seal(id); !sealed) {
      store_->unpin(id);
      store_->free(id);
      for (const auto& w : p.waiters) {
        reply_error(w.request_id, w.reply_to, sealed.error(), detail::failure_kind::object_lost);
      }
      return;
    }
    store_->unpin(id);  // the puller's pin; readers pin below
    ++pulled_objects_;
    pulled_bytes_ += p.size;
    CELER_LOG(debug, "store", "pulled " + id.short_hex() + " (" + std::to_string(p.size) + " bytes)");
  }
  if (failed != nullptr) {
    if (transfer) {
      store_->unpin(id);
      store_->free(id);
    }
    for (const auto& w : p.waiters) {
      reply_error(w.request_id, w.reply_to, *failed, detail::failure_kind::object_lost);
    }
    return;
  }
  for (const auto& w : p.waiters) answer_get(w.request_id, w.reply_to, id, transfer, w.arena_known);
}

void node_store::on(protocol::store_release& m) {
  expire_pulls();
  if (!fence_.allows(m.sender_job, m.id, "release")) return;
  clients_.unpin(m.client, m.id);
  if (!m.abandon) return;
  store_->free(m.id);
  if (auto p = pulls_.find(m.id); p != pulls_.end() && p->second.source.nil()) {
    const error e(error_code::not_found,
                  "object " + m.id.hex() + " was abandoned by its writer before it was complete");
    finish_pull(m.id, &e);
  }
}

void node_store::on(protocol::store_free& m) {
  expire_pulls();
  for (const auto& id : m.ids) {
    if (pulls_.contains(id)) continue;  // a copy still arriving stays until its job ends
    if (fence_.allows(m.sender_job, id, "free")) store_->free(id);
  }
}

void node_store::process_gone(const std::string& endpoint) { clients_.process_gone(endpoint); }

void node_store::job_finished(const job_id& job) {
  clients_.job_finished(job);
  (void)store_->free_job(job);
}

void node_store::announce_durable() {
  auto ids = store_->durable_ids();
  if (ids.empty()) return;
  CELER_LOG(info, "store", std::to_string(ids.size()) + " durable object(s) found on disk");
  std::vector<object_id> typed;
  typed.reserve(ids.size());
  for (const auto& id : ids) typed.emplace_back(id);
  (void)net_.send(cfg_.head, protocol::durable_objects{cfg_.node, std::move(typed)});
}

void node_store::node_died(const node_id& node) {
  dead_nodes_.insert(node);
  server_.forget(node);
  std::vector<object_id> failed;
  for (const auto& [id, p] : pulls_) {
    if (!p.source.nil() && node_id(p.source.id) == node) failed.push_back(id);
  }
  for (const auto& id : failed) {
    const error e(error_code::unavailable,
                  "object " + id.hex() + ": the node holding it died during the transfer");
    finish_pull(id, &e);
  }
}

void node_store::on(protocol::store_stats_query& m) {
  (void)net_.send(m.reply_to, protocol::store_stats_reply{m.request_id, stats()});
}

protocol::store_counters node_store::stats() const {
  const auto s = store_->stats();
  protocol::store_counters c;
  c.capacity = s.capacity;
  c.bytes_in_memory = s.bytes_in_memory;
  c.objects_in_memory = s.objects_in_memory;
  c.objects_on_disk_only = s.objects_on_disk_only;
  c.spilled_objects = s.spilled_objects;
  c.spilled_bytes = s.spilled_bytes;
  c.restored_objects = s.restored_objects;
  c.restored_bytes = s.restored_bytes;
  c.pulled_objects = pulled_objects_;
  c.pulled_bytes = pulled_bytes_;
  return c;
}

} // namespace celer
