#pragma once
// RocksDB's background threads belong to its process-wide default Env and outlive the
// databases that used them. Each database here counts itself open and closed; when the
// last one closes, the threads are told to exit, so that a runtime that shuts down leaves
// no thread behind. (The next open starts them again.)

namespace celer::store {

void rocksdb_opened();
void rocksdb_closed();

} // namespace celer::store
