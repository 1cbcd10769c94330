#pragma once
// The store's public face, with <celer/store/shm_arena.hpp> and <celer/store/checksum.hpp>:
// the node agent (runtime/src/node) holds one object_store and drives it.
//
// A node's object store: objects in the node's shared memory (shm_arena), pinned while a
// writer fills them or a reader maps them, the least recently used unpinned ones spilled to
// disk (spill_db) when space runs out and restored when read again, durable ones written
// through to disk when sealed. The node agent owns it and calls it from one thread; every
// method is plain logic with no waiting except for disk I/O.
//
//   auto s = object_store::open({.capacity = 1 << 30, .dir = "/tmp/node/objects"});
//   auto at = (*s)->create(id, size, /*lead=*/0, {owner, job});   // pinned by its writer
//   std::memcpy((*s)->segment().base() + at->offset, data, size);
//   (*s)->seal(id); (*s)->unpin(id);                               // readable, spillable
//   auto where = (*s)->pin(id);                                    // restores if spilled

#include <celer/error.hpp>
#include <celer/ids.hpp>
#include <celer/store/disk_record.hpp>
#include <celer/store/shm_arena.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace celer::store {

class spill_db;  // the disk tier (files, indexed in RocksDB), private to store/src

class object_store {
public:
  struct config {
    /// Bytes of shared memory for objects.
    std::size_t capacity = 0;
    /// The disk tier's directory; empty means no spilling and no durable objects.
    std::string dir;
    /// Spill unpinned objects to `dir` when memory runs out (otherwise creation fails).
    bool spill = true;
  };
  /// Who an object belongs to, so that they can be freed together.
  struct tags {
    unique_id owner;
    unique_id job;
  };
  /// Where an object's bytes are: `size` bytes at `offset` in the segment.
  struct location {
    std::size_t offset = 0;
    std::size_t size = 0;
  };
  struct counters {
    std::size_t capacity = 0;
    std::size_t bytes_in_memory = 0;
    std::size_t objects_in_memory = 0;
    std::size_t objects_on_disk_only = 0;
    std::size_t pinned_objects = 0;
    std::uint64_t spilled_objects = 0;
    std::uint64_t spilled_bytes = 0;
    std::uint64_t restored_objects = 0;
    std::uint64_t restored_bytes = 0;
    std::uint64_t durable_objects = 0;
  };

  /// Creates the shared memory and opens the disk tier; durable objects a previous run of
  /// this node left in `dir` are known again (on disk, restored when read).
  [[nodiscard]] static expected<std::unique_ptr<object_store>> open(config cfg);
  ~object_store();

  [[nodiscard]] const shm_segment& segment() const noexcept { return segment_; }

  /// Makes room for an object of `size` bytes starting `lead` bytes into its block (so that
  /// its writer can align what follows a header), spilling others if needed. The new
  /// object is pinned once, for its writer, and not readable until sealed.
  /// already_exists when `id` is known; resource_exhausted (with sizes) when it cannot fit
  /// (a size near SIZE_MAX included: nothing wraps); invalid_argument when `lead` is not
  /// below block_allocator::alignment.
  [[nodiscard]] expected<location> create(const unique_id& id, std::size_t size,
                                          std::size_t lead, const tags& tag, bool durable);
  /// Marks a created object complete; a durable one is written to disk (synced) first.
  [[nodiscard]] expected<void> seal(const unique_id& id);
  /// Pins a sealed object in memory (restoring it from disk if spilled) and says where it
  /// is. not_found when unknown or not yet sealed; data_loss when its disk copy is damaged.
  [[nodiscard]] expected<location> pin(const unique_id& id);
  /// Drops one pin; an unpinned object may spill.
  void unpin(const unique_id& id);
  /// Deletes the object from memory and disk (when pinned, its memory goes with the last
  /// unpin). Unknown ids are ignored.
  void free(const unique_id& id);
  /// Frees the objects of an owner that is gone, except durable ones (those outlive the
  /// process that made them); returns how many.
  std::size_t free_owner(const unique_id& owner);
  /// Frees every object of a finished job, durable ones included; returns how many.
  std::size_t free_job(const unique_id& job);

  [[nodiscard]] bool contains(const unique_id& id) const;
  /// The durable objects the store holds (on disk).
  [[nodiscard]] std::vector<unique_id> durable_ids() const;
  [[nodiscard]] bool durable(const unique_id& id) const;
  [[nodiscard]] bool sealed(const unique_id& id) const;
  /// The job an object was created (or pulled here) for; nullopt when unknown or freed.
  [[nodiscard]] std::optional<unique_id> job_of(const unique_id& id) const;
  [[nodiscard]] counters stats() const;

private:
  struct entry {
    disk_record rec;
    /// Block in shared memory (valid while in_memory).
    std::size_t block = 0;
    std::size_t block_size = 0;
    bool in_memory = false;
    bool on_disk = false;
    bool sealed = false;
    bool freed = false;
    int pins = 0;
    /// Position in lru_ while in memory, sealed and unpinned.
    std::list<unique_id>::iterator lru;
    bool in_lru = false;
  };

  object_store(config cfg, shm_segment segment, std::unique_ptr<spill_db> db);
  /// The block an object of `size` bytes after `lead` needs, or why it cannot have one.
  [[nodiscard]] expected<std::size_t> block_bytes(const unique_id& id, std::uint64_t size,
                                                  std::uint64_t lead) const;
  /// A block of `bytes`, evicting least recently used unpinned objects until one fits.
  [[nodiscard]] expected<std::size_t> allocate(std::size_t bytes, const unique_id& for_id);
  /// Moves an unpinned object out of memory (writing it to disk first unless it is there).
  [[nodiscard]] expected<void> evict(entry& e);
  void drop_memory(entry& e);
  void erase(std::unordered_map<unique_id, entry>::iterator it);
  std::size_t free_if(const std::function<bool(const entry&)>& match);
  [[nodiscard]] std::byte* data(const entry& e) const {
    return segment_.base() + e.block + e.rec.lead;
  }

  config cfg_;
  shm_segment segment_;
  block_allocator blocks_;
  std::unique_ptr<spill_db> db_;
  std::unordered_map<unique_id, entry> objects_;
  /// Sealed, unpinned objects in memory, most recently used first.
  std::list<unique_id> lru_;
  counters counts_;
};

} // namespace celer::store
