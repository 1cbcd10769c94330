#pragma once
// What the object store's tests share: a scratch directory, patterned bytes, and putting
// an object in and reading it back through the store's own calls.

#include <celer/store/object_store.hpp>

#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace celer::store::testing {

/// A fresh directory for one test's disk tier, removed afterwards.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    path = std::filesystem::temp_directory_path() /
           ("celer-store-test-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

inline std::vector<std::byte> pattern(std::size_t size, unsigned seed) {
  std::vector<std::byte> v(size);
  std::mt19937 gen(seed);
  for (auto& b : v) b = static_cast<std::byte>(gen());
  return v;
}

inline unique_id id_of(std::uint64_t n) { return unique_id{0xc0ffee, n}; }

/// Creates, fills, seals and unpins an object of `job` (one job for all unless given);
/// returns where it was written.
inline object_store::location put(object_store& s, const unique_id& id,
                                  const std::vector<std::byte>& v, bool durable = false,
                                  const unique_id& job = unique_id{2, 2}) {
  auto at = s.create(id, v.size(), /*lead=*/0, {unique_id{1, 1}, job}, durable);
  REQUIRE(at);
  std::memcpy(at->segment->base() + at->offset, v.data(), v.size());
  REQUIRE(s.seal(id));
  s.unpin(id);
  return *at;
}

inline bool reads_back(object_store& s, const unique_id& id, const std::vector<std::byte>& v) {
  auto at = s.pin(id);
  if (!at) {
    INFO(at.error().message());
    return false;
  }
  const bool same = at->size == v.size() &&
                    std::memcmp(at->segment->base() + at->offset, v.data(), v.size()) == 0;
  s.unpin(id);
  return same;
}

} // namespace celer::store::testing
