#pragma once
/// celer's version, and the wire protocol version every hello carries.

namespace celer {
inline constexpr const char* version_string = "0.1.0";
inline constexpr int version_major = 0;
inline constexpr int version_minor = 1;
inline constexpr int version_patch = 0;
/// Bumped whenever a message's layout changes; peers with another version are refused.
inline constexpr int protocol_version = 23;
} // namespace celer
