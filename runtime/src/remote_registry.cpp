// The registry of remote functions, factories and methods (remote_registry.hpp).
#include "remote_registry.hpp"

#include "type_names.hpp"

#include <algorithm>
#include <mutex>

namespace celer {

void remote_registry::add(detail::remote_entry entry) {
  std::unique_lock lock(mutex_);
  if (auto it = by_name_.find(entry.name); it != by_name_.end()) {
    if (!(it->second.key == entry.key)) {
      clashes_.push_back({entry.name, it->second.key.type, entry.key.type});
    }
    return;  // the same function again (a header included twice): nothing changes
  }
  const std::string name = entry.name;
  auto& stored = by_name_.emplace(name, std::move(entry)).first->second;
  by_key_.try_emplace(stored.key, &stored);
}

const detail::remote_entry* remote_registry::find(std::string_view name) const {
  std::shared_lock lock(mutex_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

const detail::remote_entry* remote_registry::find(const detail::remote_key& key) const {
  std::shared_lock lock(mutex_);
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

expected<void> remote_registry::check() const {
  std::shared_lock lock(mutex_);
  if (clashes_.empty()) return {};
  std::string text = "CELER_REMOTE registers different functions under one name: ";
  for (std::size_t i = 0; i < clashes_.size(); ++i) {
    const auto& c = clashes_[i];
    const std::string first = c.first != nullptr ? type_name(*c.first) : "unknown";
    const std::string second = c.second != nullptr ? type_name(*c.second) : "unknown";
    if (i > 0) text += "; ";
    text += "'" + c.name + "' (" +
            (first == second ? "two functions of type " + first : first + " and " + second) + ")";
  }
  text += ". A task names its function on the wire, so each name must mean one function: "
          "register one of them under a wrapper of another name. (A static or "
          "anonymous-namespace function defined in a header is a different function in each "
          "file that includes it: declare it inline instead.)";
  return error(error_code::invalid_argument, std::move(text));
}

void remote_registry::forget(std::string_view name) {
  std::unique_lock lock(mutex_);
  std::erase_if(clashes_, [&](const clash& c) { return c.name == name; });
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return;
  const detail::remote_key key = it->second.key;
  const detail::remote_entry* gone = &it->second;
  by_name_.erase(it);
  if (auto k = by_key_.find(key); k != by_key_.end() && k->second == gone) {
    by_key_.erase(k);
    // Another name for the same function, if any, answers for the pointer now.
    for (const auto& [other, e] : by_name_) {
      if (e.key == key) {
        by_key_.emplace(key, &e);
        break;
      }
    }
  }
}

remote_registry& global_remote_registry() {
  static remote_registry r;  // constructed on first use: CELER_REMOTE runs at static init
  return r;
}

namespace detail {

void register_remote(remote_entry entry) { global_remote_registry().add(std::move(entry)); }

const remote_entry* find_remote(std::string_view name) { return global_remote_registry().find(name); }

const remote_entry* find_remote(const remote_key& key) { return global_remote_registry().find(key); }

} // namespace detail

} // namespace celer
