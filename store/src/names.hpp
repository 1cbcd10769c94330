#pragma once
// How the store names things in its messages.

#include <celer/ids.hpp>

#include <cstdint>
#include <string>

namespace celer::store {

/// An id as 32 hex digits (the runtime's unique_id::hex lives in a library the store does
/// not link).
inline std::string hex(const unique_id& id) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (const std::uint64_t word : {id.hi, id.lo}) {
    for (int i = 15; i >= 0; --i) s.push_back(digits[(word >> (4 * i)) & 0xf]);
  }
  return s;
}

} // namespace celer::store
