#pragma once
// What the object store records about each object: its size, checksum, owner and job, and
// whether it is durable. The store keeps one per object; its disk tier (store/src/spill_db)
// writes it to its RocksDB index after the object's file, so a record on disk means the copy
// is complete.
// Public only because <celer/store/object_store.hpp> holds one per object by value.
//
//   disk_record rec{.id = id, .size = size, .lead = 0, .durable = true, .job = job};

#include <celer/ids.hpp>

#include <cstdint>

namespace celer::store {

/// What the store records about one object (in memory, and on disk beside its file).
struct disk_record {
  unique_id id;
  std::uint64_t size = 0;
  std::uint64_t checksum = 0;
  std::uint32_t lead = 0;
  bool durable = false;
  unique_id owner;
  unique_id job;
};

} // namespace celer::store
