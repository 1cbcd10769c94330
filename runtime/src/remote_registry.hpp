#pragma once
// The registry of remote functions, actor factories and methods that CELER_REMOTE fills at
// static initialisation (<celer/remote.hpp>): by name (what a task carries on the wire) and
// by pointer (what celer::task(f) and handle.task(&T::m) are given).
//
//   remote_registry r;
//   r.add(detail::make_entry("add", &add));
//   r.find("add");  r.find(detail::key_of(&add));   // the same entry
//   r.check();      // invalid_argument when a name was given to two different functions
//
// The same function registered again under the same name (a CELER_REMOTE in a header that
// two files include) changes nothing. Another function under a taken name cannot abort the
// process before main: the first stays, the clash is kept, and celer::init reports it with
// check(). Lookups take a shared lock and allocate nothing. Entries never move once added
// (callers keep pointers to them).

#include <celer/error.hpp>
#include <celer/remote.hpp>

#include <functional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <typeinfo>
#include <unordered_map>
#include <vector>

namespace celer {

class remote_registry {
public:
  void add(detail::remote_entry entry);
  [[nodiscard]] const detail::remote_entry* find(std::string_view name) const;
  [[nodiscard]] const detail::remote_entry* find(const detail::remote_key& key) const;
  /// invalid_argument naming every name given to two different functions; ok when none.
  [[nodiscard]] expected<void> check() const;
  /// Forgets `name`: its entry and the clashes recorded for it (for tests).
  void forget(std::string_view name);

private:
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  /// Hashes the bytes only; two keys with the same bytes (a vtable slot) differ by type.
  struct key_hash {
    std::size_t operator()(const detail::remote_key& k) const noexcept {
      return std::hash<std::string_view>{}(std::string_view(k.bytes.data(), k.bytes.size()));
    }
  };
  struct clash {
    std::string name;
    const std::type_info* first = nullptr;
    const std::type_info* second = nullptr;
  };

  mutable std::shared_mutex mutex_;  // guards everything below
  std::unordered_map<std::string, detail::remote_entry, name_hash, std::equal_to<>> by_name_;
  /// The first name registered for each pointer.
  std::unordered_map<detail::remote_key, const detail::remote_entry*, key_hash> by_key_;
  std::vector<clash> clashes_;
};

/// The process's registry, made on first use (CELER_REMOTE runs at static initialisation).
remote_registry& global_remote_registry();

} // namespace celer
