#pragma once
// A small durable database of named tables, rows of bytes by key, for state that must
// outlive a crash of the process that keeps it: the head's tables (runtime/src/head/
// head_tables.hpp). Every write reaches the disk (a synced write-ahead log) before it
// returns, so a row written and then a SIGKILL is a row found again. Writes are small and
// rare (control-plane changes), so syncing each is affordable. open_table_db() gives the
// RocksDB one; tests may implement the interface in memory (tests/fakes/memory_table_db.hpp).
//
//   auto db = store::open_table_db(session_dir / "head");          // expected<unique_ptr>
//   if (auto ok = (*db)->put("nodes", key, value); !ok) log(ok.error());
//   (void)(*db)->scan("nodes", [](std::string_view key, std::string_view value) { ... });
//
// Threads: one writer at a time (the head's actor); RocksDB itself is thread-safe.

#include <celer/error.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace celer::store {

/// One change to a table: a row put (or, with `erase`, removed).
struct table_write {
  std::string table;
  std::string key;
  std::string value;
  bool erase = false;
};

class table_db {
public:
  virtual ~table_db() = default;
  /// Applies `writes` atomically (all or none) and syncs them to disk. A full disk is
  /// resource_exhausted; any other storage failure unavailable.
  [[nodiscard]] virtual expected<void> apply(const std::vector<table_write>& writes) = 0;
  /// Calls `row` with each row of `table`, in key order. data_loss when the database
  /// cannot be read.
  [[nodiscard]] virtual expected<void> scan(
    std::string_view table,
    const std::function<void(std::string_view key, std::string_view value)>& row) const = 0;

  [[nodiscard]] expected<void> put(std::string table, std::string key, std::string value) {
    return apply({table_write{std::move(table), std::move(key), std::move(value), false}});
  }
  [[nodiscard]] expected<void> erase(std::string table, std::string key) {
    return apply({table_write{std::move(table), std::move(key), {}, true}});
  }
};

/// Opens (creating) the RocksDB table database in directory `dir`. unavailable (with
/// RocksDB's reason) when it cannot: another process holds it, or the disk refuses.
[[nodiscard]] expected<std::unique_ptr<table_db>> open_table_db(const std::string& dir);

} // namespace celer::store
