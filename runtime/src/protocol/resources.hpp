#pragma once
// Resource amounts as fixed-point integers (1/10000 of a unit), so that adding and
// subtracting fractional GPUs never drifts: 0.1 + 0.2 + 0.7 is exactly 1.

#include "protocol/decode_budget.hpp"

#include <celer/codec.hpp>
#include <celer/error.hpp>
#include <celer/options.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace celer::protocol {

inline constexpr std::int64_t resource_unit = 10000;
inline constexpr const char* cpu = "CPU";
inline constexpr const char* gpu = "GPU";
inline constexpr const char* memory = "memory";

/// A bag of named amounts ("CPU", "GPU", "memory", custom names).
struct resource_set {
  std::map<std::string, std::int64_t> amounts;
  CELER_MSGPACK_DEFINE(amounts)
  bool operator==(const resource_set&) const = default;

  void set(const std::string& name, double amount);
  [[nodiscard]] double get(const std::string& name) const;
  /// The fixed-point amount of `name` (0 when absent): units(gpu) is a request's GPU units.
  [[nodiscard]] std::int64_t units(const std::string& name) const {
    const auto it = amounts.find(name);
    return it == amounts.end() ? 0 : it->second;
  }
  /// Whether every amount of `need` is at most this set's.
  [[nodiscard]] bool covers(const resource_set& need) const;
  /// The first resource of `need` that exceeds this set, "" if none.
  [[nodiscard]] std::string first_short(const resource_set& need) const;
  void add(const resource_set& other);
  void subtract(const resource_set& other);
  [[nodiscard]] std::map<std::string, double> to_map() const;
  /// "CPU: 2, GPU: 0.5"
  [[nodiscard]] std::string to_string() const;
};

/// The most of one resource a request, a bundle or a node may name, in whole units (memory:
/// in bytes): a million CPUs, GPUs or custom units, 100 TB of memory. Far above any real
/// machine, and low enough that adding the amounts of thousands of nodes never overflows the
/// fixed-point int64 (1e10 and 1e18 fixed-point units).
inline constexpr double max_resource_amount = 1e6;
inline constexpr double max_memory_bytes = 1e14;
/// The most resources one set may name, and the longest name.
inline constexpr std::size_t max_resource_names = 64;
inline constexpr std::size_t max_resource_name_bytes = 128;

/// Checks a set as received from the wire (a request, a bundle, a node's total): every
/// amount zero or more and at most its bound, GPUs above 1 whole, at most
/// max_resource_names names of at most max_resource_name_bytes. invalid_argument naming
/// `what` and the first amount at fault otherwise. (Amounts are fixed-point integers on
/// the wire: NaN and infinities cannot be sent as amounts; the decoder refuses a float.)
[[nodiscard]] expected<void> validate_amounts(const resource_set& s, const std::string& what);

/// An amount as people write it: "2", "0.5", "1.25".
std::string format_amount(double amount);

/// Validates and converts a task's or actor's request; invalid_argument for negative
/// amounts or fractional GPUs above 1.
expected<resource_set> make_request(double num_cpus, double num_gpus, double memory,
                                    const std::map<std::string, double>& custom);

} // namespace celer::protocol
