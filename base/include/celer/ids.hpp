#pragma once
/// Identifiers of the runtime's things: jobs, tasks, objects, actors, nodes and workers.
///
///   celer::object_ref<int> r = celer::task(add).remote(1, 2);
///   std::cout << r.id().hex();       // 32 hex digits
///
/// Each id is 128 bits. Task and put ids are made by the submitting process (a random
/// per-process prefix and a counter); the object a task returns shares its task's id with
/// the return index in the low 16 bits.

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace celer {

/// A 128-bit identifier; all zero means "none".
struct unique_id {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;

  [[nodiscard]] bool nil() const noexcept { return hi == 0 && lo == 0; }
  /// 32 lowercase hex digits.
  [[nodiscard]] std::string hex() const;
  /// The first 8 hex digits, for logs and messages.
  [[nodiscard]] std::string short_hex() const { return hex().substr(0, 8); }
  /// A fresh random id.
  static unique_id random();
  /// The id `hex()` wrote (32 lowercase hex digits); nullopt for anything else.
  static std::optional<unique_id> parse(std::string_view hex);
  /// 16 bytes, big-endian: `hi`, then `lo` (the id as the transport and key derivation use it).
  [[nodiscard]] std::string bytes() const;
  /// The id `bytes()` wrote; nullopt unless `b` is 16 bytes long.
  static std::optional<unique_id> from_bytes(std::string_view b);
  friend auto operator<=>(const unique_id&, const unique_id&) = default;
};

/// Tag-typed ids so that an actor id cannot be passed where a node id is expected.
template <class Tag>
struct typed_id : unique_id {
  typed_id() = default;
  explicit typed_id(unique_id id) : unique_id(id) {}
  static typed_id random() { return typed_id(unique_id::random()); }
  /// The id `hex()` wrote; nullopt for anything else. E.g. a node id from `celer status`
  /// for scheduling_strategy::node_affinity.
  static std::optional<typed_id> parse(std::string_view hex) {
    auto id = unique_id::parse(hex);
    return id ? std::optional<typed_id>(typed_id(*id)) : std::nullopt;
  }
  friend auto operator<=>(const typed_id&, const typed_id&) = default;
};

using job_id = typed_id<struct job_tag>;
using task_id = typed_id<struct task_tag>;
using object_id = typed_id<struct object_tag>;
using actor_id = typed_id<struct actor_tag>;
using node_id = typed_id<struct node_tag>;
using worker_id = typed_id<struct worker_tag>;
using placement_group_id = typed_id<struct placement_group_tag>;

/// Where a component can be reached: its id and, in cluster mode, its process's endpoint
/// ("tcp://host:port"; empty when it lives in this process).
struct address {
  unique_id id;
  std::string endpoint;
  [[nodiscard]] bool nil() const noexcept { return id.nil(); }
  friend bool operator==(const address&, const address&) = default;
};

} // namespace celer

template <>
struct std::hash<celer::unique_id> {
  std::size_t operator()(const celer::unique_id& id) const noexcept {
    return static_cast<std::size_t>(id.hi * 0x9e3779b97f4a7c15ULL ^ id.lo);
  }
};
template <class Tag>
struct std::hash<celer::typed_id<Tag>> {
  std::size_t operator()(const celer::typed_id<Tag>& id) const noexcept {
    return std::hash<celer::unique_id>{}(id);
  }
};
