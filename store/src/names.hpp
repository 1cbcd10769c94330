#pragma once
// How the store names things in its messages.

#include <celer/ids.hpp>

#include <string>

namespace celer::store {

/// An id as 32 hex digits, as the runtime spells it (unique_id::hex, from celer::base).
inline std::string hex(const unique_id& id) { return id.hex(); }

} // namespace celer::store
