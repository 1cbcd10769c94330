#pragma once
// What the store's RocksDB databases (table_db, blob_db) share: how a key of a named table
// (or space) is laid out on disk, and how RocksDB's status becomes a celer::error.

#include <celer/error.hpp>

#include <rocksdb/status.h>

#include <string>
#include <string_view>

namespace celer::store {

/// A key on disk: its table's (or space's) name, a NUL, then its own key, so that each
/// table's rows sort together and a scan is one seek. Table names hold no NUL.
inline std::string disk_key(std::string_view table, std::string_view key) {
  std::string k;
  k.reserve(table.size() + 1 + key.size());
  k.append(table);
  k.push_back('\0');
  k.append(key);
  return k;
}

/// A full disk is resource_exhausted (its message says so); any other failure unavailable.
inline error from(const rocksdb::Status& s, const std::string& what) {
  const bool full = s.IsNoSpace() || s.subcode() == rocksdb::Status::SubCode::kNoSpace;
  return error(full ? error_code::resource_exhausted : error_code::unavailable,
               what + ": " + (full ? "the disk is full (" + s.ToString() + ")" : s.ToString()));
}

} // namespace celer::store
