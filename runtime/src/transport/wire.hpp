#pragma once
// The wire encoding of protocol messages, for the cluster transport: a message is one frame
// (the msgpack body of the message struct, then a small msgpack header [magic, protocol
// version, type tag, body size, bulk frame count], then one byte giving the header's length),
// followed by a frame per large bulk value. One frame, not two: CURVE seals every frame in a
// box of its own, and a small message's cost is its boxes. Decoding never trusts the peer:
// sizes, version, tag and every field are checked, and a malformed message is an error value,
// never a crash, an unbounded allocation or a hang.

#include "protocol/messages.hpp"

#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
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
  CELER_MSGPACK_DEFINE(magic, version, type, body_size, bulk_frames)
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
  CELER_MSGPACK_DEFINE(magic, version, register_job, from)
};
/// A hello is a few short strings; anything larger is refused unread.
inline constexpr std::size_t max_hello_bytes = 1024;

std::string encode_hello(const hello& h);
/// Decodes a hello frame. Errors: invalid_argument (malformed, oversized, not celer),
/// failed_precondition (another protocol version).
expected<hello> decode_hello(std::string_view frame);

/// The frames of `m`: the message frame (`prefix`, for the transport's own use, then body,
/// header and the header's length), then one frame per large bulk value. The body is packed
/// straight into the frame: no copy.
std::vector<std::string> encode(const protocol::message& m, std::string_view prefix = {});

/// encode, with the bulk frames shared instead of copied into strings (a shared_bytes value
/// stays where it lies; a bulk value is copied once, as by encode): what the transport
/// hands ZeroMQ without another copy.
struct encoded {
  std::string message;
  std::vector<protocol::shared_bytes> bulk;
};
encoded encode_shared(const protocol::message& m, std::string_view prefix = {});

/// A message frame (without prefix) from a body and a packed header of at most 255 bytes:
/// for tests and fuzzers that forge one part.
std::string message_frame(std::string_view body, std::string_view packed_header);

/// The parts of a message frame (without prefix). Errors: invalid_argument (no length byte,
/// a header longer than max_header_bytes or than the frame).
struct frame_parts {
  std::string_view body;
  std::string_view header;
};
expected<frame_parts> split(std::string_view frame);

/// The header of a message frame, read alone (to decide on the type before the body).
/// Errors: as split, and invalid_argument for a malformed header.
expected<header> peek_header(std::string_view frame);

/// Decodes the frames of one message: the message frame (without prefix), then its bulk
/// frames. Errors: invalid_argument (malformed, truncated, unknown type, wrong frame count,
/// a bulk frame referenced twice or not at all: each bulk frame is copied at most once),
/// failed_precondition (another protocol version), resource_exhausted (body and bulk frames
/// together larger than `max_body_bytes`, checked before parsing).
expected<protocol::message> decode(std::span<const std::string_view> frames,
                                   std::size_t max_body_bytes);
/// decode, with what keeps each bulk frame alive (`owners[i]` for `frames[i + 1]`, or null):
/// a shared_bytes field then reads its frame where it lies instead of copying it.
expected<protocol::message> decode(std::span<const std::string_view> frames,
                                   std::size_t max_body_bytes,
                                   std::span<const std::shared_ptr<const void>> owners);

/// The memory one decode of `input_bytes` may allocate in proportion to what the input
/// claims (msgpack's object tree, containers and the structs in them; see
/// protocol/decode_budget.hpp): 64 MiB, plus 48 bytes per input byte, at most 1 GiB.
///
/// Why: the encoder's own messages need up to about 27 bytes per byte when they are dense
/// with small structs (measured in wire_test, "real messages decode well within their
/// budget": 8.7 for celer status of 1,000 nodes, 26 for a task of 10,000 small arguments by
/// value, 20 for a task_result of 10,000 small values), and at most about 37 for the
/// smallest full encoding of any struct (an object_payload of 24 bytes: about 330 bytes of
/// struct and 23 msgpack objects of 24 bytes). 64 MiB covers every message under about
/// 1.3 MiB whatever it holds. A forged body, in which one byte (an empty array) stands for
/// a whole struct, needs hundreds of bytes per byte and is refused. The 1 GiB ceiling keeps
/// what one message can make a process allocate to four times the default
/// max_message_bytes (256 MiB) however it is built; it refuses only messages of more than
/// 20 MiB of small structs, which take seconds to decode anyway (large values travel as
/// bulk frames, outside the body).
inline constexpr std::size_t decode_budget_base = std::size_t{64} << 20;
inline constexpr std::size_t decode_budget_per_byte = 48;
inline constexpr std::size_t decode_budget_max = std::size_t{1} << 30;
[[nodiscard]] constexpr std::size_t decode_budget_for(std::size_t input_bytes) noexcept {
  if (input_bytes >= (decode_budget_max - decode_budget_base) / decode_budget_per_byte) {
    return decode_budget_max;
  }
  return decode_budget_base + decode_budget_per_byte * input_bytes;
}

/// msgpack's object builder, charging each array's and map's slots to the decode budget
/// before it allocates them in its zone (one slot is 24 bytes, 48 a map pair, for as little
/// as one input byte). A count over the limit (more elements than bytes left) is malformed,
/// not expensive: msgpack refuses it before anything is charged. Strings, binaries and exts
/// are referenced in the input, not copied.
class budgeted_object_visitor : public msgpack::v2::detail::create_object_visitor {
public:
  explicit budgeted_object_visitor(const msgpack::unpack_limit& limit)
      : create_object_visitor(&reference_in_place, nullptr, limit), limit_(limit) {}
  bool start_array(std::uint32_t n) {
    if (n <= limit_.array()) protocol::charge_decode(std::size_t{n} * sizeof(msgpack::object));
    return create_object_visitor::start_array(n);
  }
  bool start_map(std::uint32_t n) {
    if (n <= limit_.map()) protocol::charge_decode(std::size_t{n} * sizeof(msgpack::object_kv));
    return create_object_visitor::start_map(n);
  }

private:
  static bool reference_in_place(msgpack::type::object_type, std::size_t, void*) { return true; }
  msgpack::unpack_limit limit_;
};

/// Reads a T from msgpack with every length bounded by the data itself (an array cannot
/// hold more elements than there are bytes left), so a forged length cannot make the
/// decoder allocate more than the input's size, and everything the decode allocates in
/// proportion to what the input claims charged to a budget of `budget` bytes.
/// Errors: invalid_argument (malformed, trailing bytes, wrong shape), resource_exhausted
/// (decoding it would take more than `budget` bytes).
template <class T>
expected<T> bounded_unpack(std::string_view data, std::string_view what, std::size_t budget) {
  const std::size_t n = data.size();
  protocol::decode_budget left{budget};
  protocol::scoped_decode_budget scope(&left);
  try {
    protocol::charge_decode(sizeof(T));
    msgpack::zone zone;
    budgeted_object_visitor visitor(msgpack::unpack_limit(n, n, n, n, n, max_depth));
    visitor.set_zone(zone);
    std::size_t offset = 0;
    if (!msgpack::v2::parse(data.data(), n, offset, visitor)) {
      return error(error_code::invalid_argument, std::string(what) + " is malformed");
    }
    if (offset != n) {
      return error(error_code::invalid_argument,
                   std::string(what) + ": " + std::to_string(n - offset) + " trailing bytes");
    }
    T value;
    visitor.data().convert(value);
    return value;
  } catch (const protocol::decode_budget_exceeded& e) {
    return error(error_code::resource_exhausted,
                 std::string(what) + " of " + std::to_string(n) + " bytes refused: " + e.what());
  } catch (const std::exception& e) {
    return error(error_code::invalid_argument,
                 std::string(what) + " is malformed (" + e.what() + ")");
  }
}

/// bounded_unpack with the budget decode_budget_for(data.size()).
template <class T>
expected<T> bounded_unpack(std::string_view data, std::string_view what) {
  return bounded_unpack<T>(data, what, decode_budget_for(data.size()));
}

} // namespace celer::wire
