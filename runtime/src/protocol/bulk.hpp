#pragma once
// Bytes of a message that may be large (arguments, results, peer data): `bulk`, and how the
// wire encoder sets them aside as frames of their own and the decoder finds them again
// (docs/protocol.md, "A message is"). messages.hpp's structs hold them.

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <msgpack.hpp>

namespace celer::protocol {

/// Bytes that may be large (arguments, results). In memory a std::string; on the wire, one
/// at least `threshold` long travels as a frame of its own after the msgpack body, which
/// holds only its frame number (msgpack ext type 1), so the body stays small.
struct bulk : std::string {
  using std::string::string;
  using std::string::operator=;
  bulk() = default;
  bulk(std::string s) : std::string(std::move(s)) {}  // NOLINT: implicit on purpose
  static constexpr std::size_t threshold = 16 * 1024;
  static constexpr std::int8_t ext_type = 1;
};

/// The bulk frames of the message wire::decode is reading. Each frame may be referenced
/// once: a body naming one frame many times would otherwise make the receiver copy it as
/// often (one 16 MiB frame named two million times is 32 TB), and wire::decode refuses a
/// message that leaves an announced frame unused.
struct bulk_frames {
  explicit bulk_frames(std::span<const std::string_view> f) : frames(f), used(f.size(), false) {}
  std::span<const std::string_view> frames;
  std::vector<bool> used;
  std::size_t used_count = 0;
};

/// Where bulk frames go while wire::encode packs a message, and come from while
/// wire::decode unpacks one (this thread only; null otherwise: bulk packs inline).
std::vector<std::string>*& bulk_sink() noexcept;
bulk_frames*& bulk_source() noexcept;

} // namespace celer::protocol

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <>
struct pack<celer::protocol::bulk> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::protocol::bulk& v) const {
    auto* sink = celer::protocol::bulk_sink();
    if (sink != nullptr && v.size() >= celer::protocol::bulk::threshold) {
      const auto index = static_cast<std::uint32_t>(sink->size());
      sink->emplace_back(v);
      const char be[4] = {static_cast<char>(index >> 24), static_cast<char>(index >> 16),
                          static_cast<char>(index >> 8), static_cast<char>(index)};
      o.pack_ext(4, celer::protocol::bulk::ext_type);
      o.pack_ext_body(be, 4);
    } else {
      o.pack_str(static_cast<std::uint32_t>(v.size()));
      o.pack_str_body(v.data(), static_cast<std::uint32_t>(v.size()));
    }
    return o;
  }
};

template <>
struct convert<celer::protocol::bulk> {
  const msgpack::object& operator()(const msgpack::object& o, celer::protocol::bulk& v) const {
    if (o.type == msgpack::type::STR) {
      v.assign(o.via.str.ptr, o.via.str.size);
    } else if (o.type == msgpack::type::BIN) {
      v.assign(o.via.bin.ptr, o.via.bin.size);
    } else if (o.type == msgpack::type::EXT && o.via.ext.type() == celer::protocol::bulk::ext_type &&
               o.via.ext.size == 4) {
      const auto* b = reinterpret_cast<const unsigned char*>(o.via.ext.data());
      const std::uint32_t index = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) |
                                  (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
      auto* source = celer::protocol::bulk_source();
      if (source == nullptr || index >= source->frames.size()) {
        throw std::invalid_argument("a reference to bulk frame " + std::to_string(index) +
                                    ", which the message does not have");
      }
      if (source->used[index]) {
        throw std::invalid_argument("bulk frame " + std::to_string(index) +
                                    " is referenced more than once");
      }
      source->used[index] = true;
      ++source->used_count;
      // The one copy of the frame: wire::decode reads views of the transport's buffers.
      v.assign(source->frames[index]);
    } else {
      throw msgpack::type_error();
    }
    return o;
  }
};

} // namespace adaptor
} // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
} // namespace msgpack
