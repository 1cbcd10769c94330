#pragma once
// Bytes of a message that may be large (arguments, results, peer data): `bulk`, and how the
// wire encoder sets them aside as frames of their own and the decoder finds them again
// (docs/protocol.md, "A message is"). messages.hpp's structs hold them.

#include <cstdint>
#include <memory>
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

/// Bytes that stay where they lie, with what keeps them there: a view and a shared owner.
/// On the wire exactly a `bulk` value (a frame of its own from bulk::threshold bytes, inline
/// below), so peers cannot tell the two apart; in memory neither side copies it. The node
/// agent sends a pulled chunk straight out of its store's shared memory (the owner holds
/// the object's pin until ZeroMQ has sent the frame), and the receiver reads it in the
/// ZeroMQ frame it arrived in (the owner holds that frame). Copies share the bytes.
///
///   shared_bytes b(ptr, n, pin);    // borrowed: `pin` is released with the last copy
///   shared_bytes c = std::string("owned");
class shared_bytes {
public:
  shared_bytes() = default;
  /// Owns `s` (moved into a shared string).
  shared_bytes(std::string s)  // NOLINT: implicit on purpose, as bulk's
    : shared_bytes(std::make_shared<const std::string>(std::move(s))) {}
  /// `size` bytes at `data`, valid while `owner` (or a copy of it) lives.
  shared_bytes(const char* data, std::size_t size, std::shared_ptr<const void> owner) noexcept
    : data_(data), size_(size), owner_(std::move(owner)) {}
  [[nodiscard]] const char* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::string_view view() const noexcept { return {data_, size_}; }
  /// What keeps the bytes alive (null for empty bytes).
  [[nodiscard]] const std::shared_ptr<const void>& owner() const noexcept { return owner_; }
  friend bool operator==(const shared_bytes& a, std::string_view b) noexcept { return a.view() == b; }

private:
  explicit shared_bytes(std::shared_ptr<const std::string> s) noexcept
    : data_(s->data()), size_(s->size()), owner_(std::move(s)) {}
  const char* data_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<const void> owner_;
};

/// The bulk frames of the message wire::decode is reading. Each frame may be referenced
/// once: a body naming one frame many times would otherwise make the receiver copy it as
/// often (one 16 MiB frame named two million times is 32 TB), and wire::decode refuses a
/// message that leaves an announced frame unused.
struct bulk_frames {
  explicit bulk_frames(std::span<const std::string_view> f,
                       std::span<const std::shared_ptr<const void>> o = {})
    : frames(f), owners(o), used(f.size(), false) {}
  std::span<const std::string_view> frames;
  /// What keeps each frame alive, when the caller can lend it (shared_bytes then reads the
  /// frame where it lies); empty: shared_bytes copies the frame.
  std::span<const std::shared_ptr<const void>> owners;
  std::vector<bool> used;
  std::size_t used_count = 0;
};

/// Where bulk frames go while wire::encode packs a message (a bulk value is copied there,
/// shared_bytes are shared), and come from while wire::decode unpacks one (this thread
/// only; null otherwise: bulk packs inline).
std::vector<shared_bytes>*& bulk_sink() noexcept;
bulk_frames*& bulk_source() noexcept;

/// The index of the bulk frame an ext value names (bulk and shared_bytes alike), marked
/// used; throws std::invalid_argument for a frame the message does not have, or one already
/// named.
std::uint32_t take_bulk_frame(const char* ext_data);

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
      sink->emplace_back(std::string(v));
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
      const std::uint32_t index = celer::protocol::take_bulk_frame(o.via.ext.data());
      // The one copy of the frame: wire::decode reads views of the transport's buffers.
      v.assign(celer::protocol::bulk_source()->frames[index]);
    } else {
      throw msgpack::type_error();
    }
    return o;
  }
};

template <>
struct pack<celer::protocol::shared_bytes> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::protocol::shared_bytes& v) const {
    auto* sink = celer::protocol::bulk_sink();
    if (sink != nullptr && v.size() >= celer::protocol::bulk::threshold) {
      const auto index = static_cast<std::uint32_t>(sink->size());
      sink->push_back(v);  // shared, not copied
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
struct convert<celer::protocol::shared_bytes> {
  const msgpack::object& operator()(const msgpack::object& o,
                                    celer::protocol::shared_bytes& v) const {
    if (o.type == msgpack::type::STR) {
      v = std::string(o.via.str.ptr, o.via.str.size);
    } else if (o.type == msgpack::type::BIN) {
      v = std::string(o.via.bin.ptr, o.via.bin.size);
    } else if (o.type == msgpack::type::EXT && o.via.ext.type() == celer::protocol::bulk::ext_type &&
               o.via.ext.size == 4) {
      const std::uint32_t index = celer::protocol::take_bulk_frame(o.via.ext.data());
      const auto* source = celer::protocol::bulk_source();
      const std::string_view frame = source->frames[index];
      if (index < source->owners.size() && source->owners[index] != nullptr) {
        v = celer::protocol::shared_bytes(frame.data(), frame.size(), source->owners[index]);
      } else {
        v = std::string(frame);
      }
    } else {
      throw msgpack::type_error();
    }
    return o;
  }
};

} // namespace adaptor
} // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
} // namespace msgpack
