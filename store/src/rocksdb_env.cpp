#include "rocksdb_env.hpp"

#include <rocksdb/env.h>

#include <mutex>

namespace celer::store {
namespace {

std::mutex open_mutex;
int open_count = 0;  // guarded by open_mutex

} // namespace

void rocksdb_opened() {
  std::lock_guard lock(open_mutex);
  ++open_count;
}

void rocksdb_closed() {
  std::lock_guard lock(open_mutex);
  if (--open_count > 0) return;
  auto* env = rocksdb::Env::Default();
  for (auto pri : {rocksdb::Env::Priority::BOTTOM, rocksdb::Env::Priority::LOW,
                   rocksdb::Env::Priority::HIGH}) {
    env->SetBackgroundThreads(0, pri);
  }
}

} // namespace celer::store
