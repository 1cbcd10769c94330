#pragma once
// The wire encoding of protocol messages, for the cluster transport: each message is two
// frames, a small msgpack header [magic, protocol version, type tag, body size] and the
// msgpack body of the message struct. Decoding never trusts the peer: sizes, version, tag
// and every field are checked, and a malformed message is an error value, never a crash,
// an unbounded allocation or a hang.

#include "protocol/messages.hpp"

#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace celer::wire {

inline constexpr std::string_view magic = "celer";
/// A header is a handful of small fields; anything larger is not a celer header.
inline constexpr std::size_t max_header_bytes = 64;
/// Nesting deeper than this is refused (no message of the protocol nests half as deep).
inline constexpr std::size_t max_depth = 32;

struct header {
  std::string magic;
  std::int32_t version = 0;
  std::uint32_t type = 0;
  std::uint64_t body_size = 0;
  /// Bulk frames after the body (protocol::bulk values of at least bulk::threshold bytes).
  std::uint32_t bulk_frames = 0;
  MSGPACK_DEFINE(magic, version, type, body_size, bulk_frames)
};
/// More bulk frames than this in one message is refused.
inline constexpr std::size_t max_bulk_frames = 4096;

/// What a process says to check that it speaks the peer's protocol version (the handshake
/// under it already proved who it is): `celer::init` and nodes joining say it to the head.
struct hello {
  std::string magic;
  std::int32_t version = 0;
  /// A driver registers its job with the head (32 hex digits; empty otherwise). Accepted
  /// only from a connection that proved the cluster secret.
  std::string register_job;
  /// The sender's own endpoint, for logs.
  std::string from;
  MSGPACK_DEFINE(magic, version, register_job, from)
};
/// A hello is a few short strings; anything larger is refused unread.
inline constexpr std::size_t max_hello_bytes = 1024;

std::string encode_hello(const hello& h);
/// Decodes a hello frame. Errors: invalid_argument (malformed, oversized, not celer),
/// failed_precondition (another protocol version).
expected<hello> decode_hello(std::string_view frame);

/// The frames of `m`: header, body, then one frame per large bulk value.
std::vector<std::string> encode(const protocol::message& m);

/// Decodes the frames of one message. Errors: invalid_argument (malformed, truncated,
/// unknown type, wrong frame count, a bulk frame referenced twice or not at all: each
/// bulk frame is copied at most once), failed_precondition (another protocol version),
/// resource_exhausted (body and bulk frames together larger than `max_body_bytes`,
/// checked before parsing).
expected<protocol::message> decode(std::span<const std::string_view> frames,
                                   std::size_t max_body_bytes);

/// Reads a T from msgpack with every length bounded by the data itself (an array cannot
/// hold more elements than there are bytes left), so a forged length cannot make the
/// decoder allocate more than the input's size.
template <class T>
expected<T> bounded_unpack(std::string_view data, std::string_view what) {
  const std::size_t n = data.size();
  try {
    std::size_t offset = 0;
    msgpack::object_handle oh = msgpack::unpack(data.data(), n, offset, nullptr, nullptr,
                                                msgpack::unpack_limit(n, n, n, n, n, max_depth));
    if (offset != n) {
      return error(error_code::invalid_argument,
                   std::string(what) + ": " + std::to_string(n - offset) + " trailing bytes");
    }
    return oh.get().as<T>();
  } catch (const std::exception& e) {
    return error(error_code::invalid_argument,
                 std::string(what) + " is malformed (" + e.what() + ")");
  }
}

} // namespace celer::wire
