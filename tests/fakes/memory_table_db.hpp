#pragma once
// A store::table_db in memory, for tests of what keeps tables: copies share their rows (a
// "restarted" owner opens a copy and finds what the last one wrote), and `fail_writes`
// makes every write fail as on a full disk.

#include <celer/store/table_db.hpp>

#include <map>
#include <memory>
#include <string>

namespace celer::fakes {

class memory_table_db final : public store::table_db {
public:
  struct rows {
    std::map<std::string, std::map<std::string, std::string>> tables;
    bool fail_writes = false;
    std::size_t writes = 0;
  };
  explicit memory_table_db(std::shared_ptr<rows> r = std::make_shared<rows>()) : rows_(std::move(r)) {}
  [[nodiscard]] std::shared_ptr<rows> shared() const { return rows_; }

  expected<void> apply(const std::vector<store::table_write>& writes) override {
    if (rows_->fail_writes) {
      return error(error_code::resource_exhausted, "writing to memory: the disk is full (fake)");
    }
    for (const auto& w : writes) {
      if (w.erase) {
        rows_->tables[w.table].erase(w.key);
      } else {
        rows_->tables[w.table][w.key] = w.value;
      }
    }
    ++rows_->writes;
    return {};
  }
  expected<void> scan(std::string_view table,
                      const std::function<void(std::string_view, std::string_view)>& row)
    const override {
    auto it = rows_->tables.find(std::string(table));
    if (it == rows_->tables.end()) return {};
    for (const auto& [k, v] : it->second) row(k, v);
    return {};
  }

private:
  std::shared_ptr<rows> rows_;
};

} // namespace celer::fakes
