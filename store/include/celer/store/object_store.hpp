#pragma once
// The store's public face, with <celer/store/shm_arena.hpp> and <celer/store/checksum.hpp>:
// the node agent (runtime/src/node) holds one object_store and drives it.
//
// A node's object store: objects in shared memory, one arena (a memfd and its allocator,
// shm_arena) per job, so that a job's processes map their own job's objects and nothing
// else; pinned while a writer fills them or a reader maps them, the least recently used
// unpinned ones (of any job) spilled to disk (spill_db) when space runs out and restored
// when read again, durable ones written through to disk when sealed. The node agent owns it
// and calls it from one thread; every method is plain logic with no waiting except for disk
// I/O.
//
// The capacity is one budget for all jobs: the blocks allocated in all arenas together never
// exceed it. An arena is made at its job's first object here and dropped when the job is
// freed (free_job) and its last block released; its memory goes when the job's processes
// unmap it too. Freed blocks keep their pages resident within an arena (a reused block is
// written at memory speed); when the arenas' allocated and resident free bytes together would
// pass the capacity, the free pages of the other arenas (then of this one) are punched out,
// so the node's memory for objects stays within the capacity.
//
//   auto s = object_store::open({.capacity = 1 << 30, .dir = "/tmp/node/objects"});
//   auto at = (*s)->create(id, size, /*lead=*/0, {owner, job});   // pinned by its writer
//   std::memcpy(at->segment->base() + at->offset, data, size);   // in the job's arena
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
  /// Where an object's bytes are: `size` bytes at `offset` in its job's arena `arena`
  /// (an id, random, never reused by this store) mapped here as `segment` (valid while the
  /// object is pinned).
  struct location {
    std::size_t offset = 0;
    std::size_t size = 0;
    std::uint64_t arena = 0;
    const shm_segment* segment = nullptr;
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
    /// Arenas (jobs with objects in memory here, or not yet freed).
    std::size_t arenas = 0;
    /// Bytes of freed blocks still resident in the arenas (reused at memory speed).
    std::size_t resident_free_bytes = 0;
    /// Bytes of free pages punched out of arenas to keep them within the capacity.
    std::uint64_t punched_bytes = 0;
  };

  /// Opens the disk tier (arenas are made as jobs store objects); durable objects a previous
  /// run of this node left in `dir` are known again (on disk, restored when read).
  /// invalid_argument when the capacity is zero.
  [[nodiscard]] static expected<std::unique_ptr<object_store>> open(config cfg);
  ~object_store();

  /// Arena `arena`'s memory, shared: a holder keeps it mapped after the arena is dropped.
  /// Null when there is no such arena.
  [[nodiscard]] std::shared_ptr<const shm_segment> arena_segment(std::uint64_t arena) const;
  /// The arena of `job`'s objects (0: none yet).
  [[nodiscard]] std::uint64_t arena_of_job(const unique_id& job) const;
  /// The job whose arena `arena` is; nullopt when there is none.
  [[nodiscard]] std::optional<unique_id> job_of_arena(std::uint64_t arena) const;
  /// The bytes of memory all arenas hold now (pages in memory or swap), as the kernel counts.
  [[nodiscard]] std::size_t resident_bytes() const;

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
  /// Frees every object of a finished job, durable ones included, and drops its arena
  /// (once its last pinned object is released); returns how many.
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
  /// One job's shared memory and its allocator.
  struct arena {
    std::uint64_t id = 0;
    unique_id job;
    std::shared_ptr<shm_segment> segment;
    block_allocator blocks;
    /// Its job was freed: dropped when its last block is released.
    bool ended = false;
    arena(std::uint64_t i, const unique_id& j, std::shared_ptr<shm_segment> s)
      : id(i), job(j), segment(std::move(s)), blocks(segment->capacity()) {}
  };

  struct entry {
    disk_record rec;
    /// Block in its job's arena (both valid while in_memory).
    arena* where = nullptr;
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

  object_store(config cfg, std::unique_ptr<spill_db> db);
  /// The block an object of `size` bytes after `lead` needs, or why it cannot have one.
  [[nodiscard]] expected<std::size_t> block_bytes(const unique_id& id, std::uint64_t size,
                                                  std::uint64_t lead) const;
  /// A block of `bytes` in `job`'s arena (made if needed), evicting least recently used
  /// unpinned objects of any job until one fits within the capacity.
  [[nodiscard]] expected<std::pair<arena*, std::size_t>> allocate(std::size_t bytes,
                                                                  const unique_id& for_id,
                                                                  const unique_id& job);
  /// `job`'s arena, made when it has none.
  [[nodiscard]] expected<arena*> arena_for(const unique_id& job);
  /// Punches free resident pages out of the arenas (others' first, then `in`'s) while the
  /// allocated and resident free bytes together exceed the capacity.
  void bound_resident(arena& in);
  /// Drops `a` if its job ended and nothing is allocated in it.
  void drop_if_done(arena& a);
  /// Moves an unpinned object out of memory (writing it to disk first unless it is there).
  [[nodiscard]] expected<void> evict(entry& e);
  void drop_memory(entry& e);
  void erase(std::unordered_map<unique_id, entry>::iterator it);
  std::size_t free_if(const std::function<bool(const entry&)>& match);
  [[nodiscard]] std::byte* data(const entry& e) const {
    return e.where->segment->base() + e.block + e.rec.lead;
  }
  [[nodiscard]] location where(const entry& e) const {
    return {e.block + e.rec.lead, e.rec.size, e.where->id, e.where->segment.get()};
  }

  config cfg_;
  /// Usable bytes (the capacity rounded down to the block alignment), for all arenas.
  std::size_t capacity_ = 0;
  /// Bytes allocated in all arenas together (<= capacity_).
  std::size_t used_ = 0;
  /// Arenas by job (a job's arena stays at one address while it lives).
  std::unordered_map<unique_id, std::unique_ptr<arena>> arenas_;
  std::uint64_t next_arena_ = 0;
  std::unique_ptr<spill_db> db_;
  std::unordered_map<unique_id, entry> objects_;
  /// Sealed, unpinned objects in memory, most recently used first.
  std::list<unique_id> lru_;
  counters counts_;
};

} // namespace celer::store
