#pragma once
// What a failed file operation means to the caller, as celer's errors say it: a full disk is
// resource_exhausted, a refused one permission_denied, anything else unavailable; the message
// names what was being done and the path. Internal to celer::actors (the checkpoint archive,
// the trainer's metrics files).
#include <celer/error.hpp>

#include <string>
#include <string_view>

namespace celer::actors::detail {

/// `err` is an errno value.
[[nodiscard]] error io_error(int err, std::string_view what, const std::string& path);

} // namespace celer::actors::detail
