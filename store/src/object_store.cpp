#include <celer/store/object_store.hpp>

#include "names.hpp"
#include "spill_db.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <vector>

namespace celer::store {

namespace {

std::string mib(std::size_t bytes) {
  const double m = static_cast<double>(bytes) / (1024.0 * 1024.0);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", m);
  return buf;
}

} // namespace

expected<std::size_t> object_store::block_bytes(const unique_id& id, std::uint64_t size,
                                                std::uint64_t lead) const {
  // Sizes come from other processes and nodes (store_create, store_get) and from records on
  // disk: checked without wrapping before anything is allocated or addressed with them.
  if (lead >= block_allocator::alignment) {
    return error(error_code::invalid_argument,
                 "object " + hex(id) + ": a lead of " + std::to_string(lead) +
                   " bytes (it must be below the block alignment of " +
                   std::to_string(block_allocator::alignment) + ")");
  }
  std::uint64_t total = 0;
  std::optional<std::size_t> bytes;
  if (!__builtin_add_overflow(size, lead, &total)) bytes = block_allocator::round_up(total);
  if (!bytes || *bytes > capacity_) {
    return error(error_code::resource_exhausted,
                 "object " + hex(id) + " of " + std::to_string(size) +
                   " bytes is larger than the object store's capacity of " +
                   std::to_string(capacity_) + " bytes (--object-store-memory)");
  }
  return *bytes;
}

expected<std::unique_ptr<object_store>> object_store::open(config cfg) {
  if (cfg.capacity / block_allocator::alignment == 0) {
    return error(error_code::invalid_argument, "an object store needs a capacity above zero");
  }
  std::vector<disk_record> found;
  std::unique_ptr<spill_db> db;
  if (!cfg.dir.empty()) {
    auto opened = spill_db::open(cfg.dir, [&](const disk_record& r) { found.push_back(r); });
    if (!opened) return opened.error();
    db = std::move(*opened);
  }
  std::unique_ptr<object_store> s(new object_store(std::move(cfg), std::move(db)));
  for (const auto& r : found) {
    auto& e = s->objects_[r.id];
    e.rec = r;
    e.on_disk = true;
    e.sealed = true;
    ++s->counts_.durable_objects;
  }
  return s;
}

object_store::~object_store() = default;  // here, where spill_db is complete

object_store::object_store(config cfg, std::unique_ptr<spill_db> db)
  : cfg_(std::move(cfg)), capacity_(cfg_.capacity / block_allocator::alignment * block_allocator::alignment),
    db_(std::move(db)) {
  counts_.capacity = capacity_;
  // Arena ids start at a random point, so that a process's cached mappings of a previous
  // run's arenas (the node agent started again) are never taken for this run's.
  std::random_device rd;
  next_arena_ = (std::uint64_t{rd()} << 32) ^ rd();
}

expected<object_store::arena*> object_store::arena_for(const unique_id& job) {
  auto& a = arenas_[job];
  if (!a) {
    // Each arena is as large as the whole store (sparse: pages exist once written), so
    // that any object that fits the budget fits its job's arena.
    auto segment = shm_segment::create(capacity_, "celer-object-arena");
    if (!segment) {
      arenas_.erase(job);
      return segment.error();
    }
    if (++next_arena_ == 0) ++next_arena_;
    a = std::make_unique<arena>(next_arena_, job,
                                std::make_shared<shm_segment>(std::move(*segment)));
  }
  a->ended = false;  // a job's late object after free_job keeps its arena until freed again
  return a.get();
}

void object_store::bound_resident(arena& in) {
  std::size_t resident_free = 0;
  for (const auto& [job, a] : arenas_) resident_free += a->blocks.resident_free();
  if (used_ + resident_free <= capacity_) return;
  // Other arenas' free pages first; `in`'s own (those it would reuse soonest) last.
  for (const bool own : {false, true}) {
    for (const auto& [job, a] : arenas_) {
      if ((a.get() == &in) != own) continue;
      for (const auto& [offset, size] : a->blocks.take_resident_free()) {
        a->segment->punch(offset, size);
        resident_free -= size;
        counts_.punched_bytes += size;
      }
      if (used_ + resident_free <= capacity_) return;
    }
  }
}

void object_store::drop_if_done(arena& a) {
  if (a.ended && a.blocks.used() == 0) arenas_.erase(a.job);  // `a` is gone after this
}

std::shared_ptr<const shm_segment> object_store::arena_segment(std::uint64_t id) const {
  for (const auto& [job, a] : arenas_) {
    if (a->id == id) return a->segment;
  }
  return nullptr;
}

std::uint64_t object_store::arena_of_job(const unique_id& job) const {
  auto it = arenas_.find(job);
  return it == arenas_.end() ? 0 : it->second->id;
}

std::optional<unique_id> object_store::job_of_arena(std::uint64_t id) const {
  for (const auto& [job, a] : arenas_) {
    if (a->id == id) return job;
  }
  return std::nullopt;
}

std::size_t object_store::resident_bytes() const {
  std::size_t n = 0;
  for (const auto& [job, a] : arenas_) n += a->segment->resident_bytes();
  return n;
}

expected<std::pair<object_store::arena*, std::size_t>> object_store::allocate(
  std::size_t bytes, const unique_id& for_id, const unique_id& job) {
  if (bytes > capacity_) {
    return error(error_code::resource_exhausted,
                 "object " + hex(for_id) + " needs " + std::to_string(bytes) +
                   " bytes, more than the object store's capacity of " +
                   std::to_string(capacity_) + " bytes (--object-store-memory)");
  }
  auto in = arena_for(job);
  if (!in) return in.error();
  arena& a = **in;
  for (;;) {
    // One budget for every job: this job's arena has room as long as all arenas together do
    // (an arena is as large as the capacity; only fragmentation can leave no block).
    if (used_ + bytes <= capacity_) {
      if (auto at = a.blocks.allocate(bytes)) {
        used_ += bytes;
        bound_resident(a);
        return std::pair{&a, *at};
      }
    }
    if (lru_.empty()) break;
    auto it = objects_.find(lru_.back());
    if (auto evicted = evict(it->second); !evicted) {
      return error(evicted.error().code(),
                   "object " + hex(for_id) + " (" + mib(bytes) + ") needs room in the object store (" +
                     mib(used_) + " of " + mib(capacity_) +
                     " in use), and spilling another object to disk failed: " +
                     evicted.error().message());
    }
  }
  std::size_t pinned = 0;
  for (const auto& [id, e] : objects_) {
    if (e.in_memory && e.pins > 0) pinned += e.block_size;
  }
  const bool can_spill = cfg_.spill && db_ != nullptr;
  return error(error_code::resource_exhausted,
               "object " + hex(for_id) + " (" + mib(bytes) + ") does not fit in the object store: " +
                 mib(used_) + " of " + mib(capacity_) + " in use, " +
                 mib(pinned) + " of it pinned by readers and writers" +
                 (can_spill ? std::string() : ", and spilling to disk is off"));
}

expected<void> object_store::evict(entry& e) {
  if (!e.on_disk) {
    if (!cfg_.spill || db_ == nullptr) {
      return error(error_code::resource_exhausted, "spilling to disk is off");
    }
    if (auto w = db_->write(e.rec, data(e)); !w) return w.error();
    e.on_disk = true;
    ++counts_.spilled_objects;
    counts_.spilled_bytes += e.rec.size;
  }
  drop_memory(e);
  return {};
}

void object_store::drop_memory(entry& e) {
  if (e.in_lru) {
    lru_.erase(e.lru);
    e.in_lru = false;
  }
  if (e.in_memory) {
    arena& a = *e.where;
    a.blocks.release(e.block, e.block_size);
    used_ -= e.block_size;
    e.in_memory = false;
    e.where = nullptr;
    counts_.bytes_in_memory -= e.block_size;
    --counts_.objects_in_memory;
    drop_if_done(a);
  }
}

expected<object_store::location> object_store::create(const unique_id& id, std::size_t size,
                                                       std::size_t lead, const tags& tag,
                                                       bool durable) {
  if (objects_.contains(id)) {
    return error(error_code::already_exists, "object " + hex(id) + " is already in the store");
  }
  if (durable && db_ == nullptr) {
    return error(error_code::failed_precondition,
                 "durable objects need the object store's disk tier, and this node has none");
  }
  const auto bytes = block_bytes(id, size, lead);
  if (!bytes) return bytes.error();
  auto block = allocate(*bytes, id, tag.job);
  if (!block) return block.error();
  auto& e = objects_[id];
  e.rec.id = id;
  e.rec.size = size;
  e.rec.lead = static_cast<std::uint32_t>(lead);
  e.rec.durable = durable;
  e.rec.owner = tag.owner;
  e.rec.job = tag.job;
  e.where = block->first;
  e.block = block->second;
  e.block_size = *bytes;
  e.in_memory = true;
  e.pins = 1;
  counts_.bytes_in_memory += *bytes;
  ++counts_.objects_in_memory;
  return where(e);
}

expected<void> object_store::seal(const unique_id& id) {
  auto it = objects_.find(id);
  if (it == objects_.end() || it->second.freed) {
    return error(error_code::not_found, "object " + hex(id) + " was not created in this store");
  }
  auto& e = it->second;
  if (e.sealed) return {};
  if (e.rec.durable) {
    if (auto w = db_->write(e.rec, data(e)); !w) return w.error();
    e.on_disk = true;
    ++counts_.durable_objects;
  }
  e.sealed = true;
  return {};
}

expected<object_store::location> object_store::pin(const unique_id& id) {
  auto it = objects_.find(id);
  if (it == objects_.end() || it->second.freed || !it->second.sealed) {
    return error(error_code::not_found, "object " + hex(id) + " is not in this node's store");
  }
  auto& e = it->second;
  if (!e.in_memory) {
    const auto bytes = block_bytes(id, e.rec.size, e.rec.lead);
    if (!bytes) return bytes.error();
    auto block = allocate(*bytes, id, e.rec.job);
    if (!block) return block.error();
    e.where = block->first;
    e.block = block->second;
    e.block_size = *bytes;
    e.in_memory = true;
    counts_.bytes_in_memory += *bytes;
    ++counts_.objects_in_memory;
    if (auto r = db_->read(e.rec, data(e)); !r) {
      drop_memory(e);
      return r.error();
    }
    ++counts_.restored_objects;
    counts_.restored_bytes += e.rec.size;
  }
  if (e.in_lru) {
    lru_.erase(e.lru);
    e.in_lru = false;
  }
  ++e.pins;
  return where(e);
}

void object_store::unpin(const unique_id& id) {
  auto it = objects_.find(id);
  if (it == objects_.end() || it->second.pins == 0) return;
  auto& e = it->second;
  if (--e.pins > 0) return;
  if (e.freed) {
    erase(it);
    return;
  }
  if (e.in_memory && e.sealed) {
    lru_.push_front(id);
    e.lru = lru_.begin();
    e.in_lru = true;
  }
}

void object_store::erase(std::unordered_map<unique_id, entry>::iterator it) {
  drop_memory(it->second);
  objects_.erase(it);
}

void object_store::free(const unique_id& id) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  auto& e = it->second;
  if (e.on_disk && db_ != nullptr) {
    db_->erase(id);
    e.on_disk = false;
    if (e.rec.durable && counts_.durable_objects > 0) --counts_.durable_objects;
  }
  if (e.pins > 0) {
    e.freed = true;  // its readers still map it; the memory goes with the last unpin
    return;
  }
  erase(it);
}

std::size_t object_store::free_if(const std::function<bool(const entry&)>& match) {
  std::vector<unique_id> ids;
  for (const auto& [id, e] : objects_) {
    if (!e.freed && match(e)) ids.push_back(id);
  }
  for (const auto& id : ids) free(id);
  return ids.size();
}

std::size_t object_store::free_owner(const unique_id& owner) {
  return free_if([&](const entry& e) { return e.rec.owner == owner && !e.rec.durable; });
}

std::size_t object_store::free_job(const unique_id& job) {
  const auto n = free_if([&](const entry& e) { return e.rec.job == job; });
  if (auto it = arenas_.find(job); it != arenas_.end()) {
    it->second->ended = true;
    drop_if_done(*it->second);
  }
  return n;
}

bool object_store::contains(const unique_id& id) const {
  auto it = objects_.find(id);
  return it != objects_.end() && !it->second.freed;
}

std::vector<unique_id> object_store::durable_ids() const {
  std::vector<unique_id> out;
  for (const auto& [id, e] : objects_) {
    if (!e.freed && e.rec.durable && e.on_disk) out.push_back(id);
  }
  return out;
}

bool object_store::durable(const unique_id& id) const {
  auto it = objects_.find(id);
  return it != objects_.end() && !it->second.freed && it->second.rec.durable;
}

std::optional<unique_id> object_store::job_of(const unique_id& id) const {
  auto it = objects_.find(id);
  if (it == objects_.end() || it->second.freed) return std::nullopt;
  return it->second.rec.job;
}

bool object_store::sealed(const unique_id& id) const {
  auto it = objects_.find(id);
  return it != objects_.end() && !it->second.freed && it->second.sealed;
}

object_store::counters object_store::stats() const {
  counters c = counts_;
  c.objects_on_disk_only = 0;
  c.pinned_objects = 0;
  c.arenas = arenas_.size();
  c.resident_free_bytes = 0;
  for (const auto& [job, a] : arenas_) c.resident_free_bytes += a->blocks.resident_free();
  for (const auto& [id, e] : objects_) {
    if (e.freed) continue;
    if (e.on_disk && !e.in_memory) ++c.objects_on_disk_only;
    if (e.pins > 0) ++c.pinned_objects;
  }
  return c;
}

} // namespace celer::store
