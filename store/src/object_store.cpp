#include <celer/store/object_store.hpp>

#include "names.hpp"
#include "spill_db.hpp"

#include <algorithm>
#include <functional>
#include <optional>
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
  if (!bytes || *bytes > blocks_.capacity()) {
    return error(error_code::resource_exhausted,
                 "object " + hex(id) + " of " + std::to_string(size) +
                   " bytes is larger than the object store's capacity of " +
                   std::to_string(blocks_.capacity()) + " bytes (--object-store-memory)");
  }
  return *bytes;
}

expected<std::unique_ptr<object_store>> object_store::open(config cfg) {
  auto segment = shm_segment::create(cfg.capacity);
  if (!segment) return segment.error();
  std::vector<disk_record> found;
  std::unique_ptr<spill_db> db;
  if (!cfg.dir.empty()) {
    auto opened = spill_db::open(cfg.dir, [&](const disk_record& r) { found.push_back(r); });
    if (!opened) return opened.error();
    db = std::move(*opened);
  }
  std::unique_ptr<object_store> s(new object_store(std::move(cfg), std::move(*segment), std::move(db)));
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

object_store::object_store(config cfg, shm_segment segment, std::unique_ptr<spill_db> db)
  : cfg_(std::move(cfg)), segment_(std::move(segment)), blocks_(segment_.capacity()),
    db_(std::move(db)) {
  counts_.capacity = blocks_.capacity();
}

expected<std::size_t> object_store::allocate(std::size_t bytes, const unique_id& for_id) {
  if (bytes > blocks_.capacity()) {
    return error(error_code::resource_exhausted,
                 "object " + hex(for_id) + " needs " + std::to_string(bytes) +
                   " bytes, more than the object store's capacity of " +
                   std::to_string(blocks_.capacity()) + " bytes (--object-store-memory)");
  }
  for (;;) {
    if (auto at = blocks_.allocate(bytes)) return *at;
    if (lru_.empty()) break;
    auto it = objects_.find(lru_.back());
    if (auto evicted = evict(it->second); !evicted) {
      return error(evicted.error().code(),
                   "object " + hex(for_id) + " (" + mib(bytes) + ") needs room in the object store (" +
                     mib(blocks_.used()) + " of " + mib(blocks_.capacity()) +
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
                 mib(blocks_.used()) + " of " + mib(blocks_.capacity()) + " in use, " +
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
    blocks_.release(e.block, e.block_size);
    e.in_memory = false;
    counts_.bytes_in_memory -= e.block_size;
    --counts_.objects_in_memory;
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
  auto block = allocate(*bytes, id);
  if (!block) return block.error();
  auto& e = objects_[id];
  e.rec.id = id;
  e.rec.size = size;
  e.rec.lead = static_cast<std::uint32_t>(lead);
  e.rec.durable = durable;
  e.rec.owner = tag.owner;
  e.rec.job = tag.job;
  e.block = *block;
  e.block_size = *bytes;
  e.in_memory = true;
  e.pins = 1;
  counts_.bytes_in_memory += *bytes;
  ++counts_.objects_in_memory;
  return location{e.block + lead, size};
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
    auto block = allocate(*bytes, id);
    if (!block) return block.error();
    e.block = *block;
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
  return location{e.block + e.rec.lead, e.rec.size};
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
  return free_if([&](const entry& e) { return e.rec.job == job; });
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
  for (const auto& [id, e] : objects_) {
    if (e.freed) continue;
    if (e.on_disk && !e.in_memory) ++c.objects_on_disk_only;
    if (e.pins > 0) ++c.pinned_objects;
  }
  return c;
}

} // namespace celer::store
