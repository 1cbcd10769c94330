#pragma once
// Internals of <celer/codec.hpp>: packing and unpacking values, and the msgpack adaptors of
// celer's own types. Include <celer/codec.hpp>, not this header.

#include <celer/bytes.hpp>
#include <celer/error.hpp>
#include <celer/handles.hpp>
#include <celer/ids.hpp>

#include <msgpack.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace celer::detail {

/// The number types whose std::vector travels as raw bytes (msgpack `bin`, native byte
/// order), like celer::array<T>, instead of one msgpack number per element: every
/// arithmetic type but bool and the character types (std::vector<char> and
/// std::vector<unsigned char> are `bin` in msgpack already) and long double.
template <class T>
concept bulk_number =
  std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
  !std::is_same_v<T, unsigned char> && !std::is_same_v<T, wchar_t> &&
  !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t> &&
  !std::is_same_v<T, long double>;

/// A msgpack stream that only counts: how large `value` packs, and its first byte (so
/// that the store can align the body that follows a bin or str header).
struct size_counter {
  std::size_t size = 0;
  unsigned char first = 0;
  void write(const char* data, std::size_t n) {
    if (size == 0 && n > 0) first = static_cast<unsigned char>(data[0]);
    size += n;
  }
};

/// A msgpack stream into memory sized beforehand (by size_counter).
struct memory_writer {
  char* at;
  void write(const char* data, std::size_t n) {
    std::memcpy(at, data, n);
    at += n;
  }
};

/// Serialises `value` to msgpack (one pass: packing may have side effects, such as bulk
/// frames set aside by the wire encoder).
template <class T>
std::string pack(const T& value) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, value);
  return std::string(buf.data(), buf.size());
}

/// While set on this thread, decoding a `bytes` value makes a view kept alive by it (the
/// mapping of the object being decoded) instead of a copy.
inline const std::shared_ptr<const void>*& decode_keepalive() noexcept {
  thread_local const std::shared_ptr<const void>* keep = nullptr;
  return keep;
}

/// Reads a T from msgpack; throws celer::exception(invalid_argument) when `data` is not
/// a valid encoding of a T. `what` names the value in the message ("argument 2 of add").
/// Strings and binaries are read in place (no copy into a zone); `keep`, if given, keeps
/// `data` valid, and `bytes` values become views of it.
template <class T>
T unpack(std::string_view data, std::string_view what,
         const std::shared_ptr<const void>* keep = nullptr) {
  struct scoped_keep {
    const std::shared_ptr<const void>* saved;
    explicit scoped_keep(const std::shared_ptr<const void>* k) : saved(decode_keepalive()) {
      decode_keepalive() = k;
    }
    ~scoped_keep() { decode_keepalive() = saved; }
  } scope(keep);
  try {
    msgpack::object_handle oh = msgpack::unpack(
      data.data(), data.size(), [](msgpack::type::object_type, std::size_t, void*) { return true; });
    return oh.get().as<T>();
  } catch (const std::exception& e) {
    throw exception(error_code::invalid_argument,
                    std::string(what) + " does not match the expected type (" + e.what() + ")");
  }
}

/// The ref is being serialised (into an argument or a value): it may be held where its
/// owner cannot count it, so the owner keeps the object until its job ends.
void object_escaped(const object_id& id, const address& owner);

} // namespace celer::detail

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <>
struct pack<celer::bytes> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::bytes& v) const {
    o.pack_bin(static_cast<uint32_t>(v.size()));
    o.pack_bin_body(reinterpret_cast<const char*>(v.data()), static_cast<uint32_t>(v.size()));
    return o;
  }
};
template <>
struct convert<celer::bytes> {
  const msgpack::object& operator()(const msgpack::object& o, celer::bytes& v) const {
    if (o.type == msgpack::type::BIN && celer::detail::decode_keepalive() != nullptr) {
      v = celer::bytes(o.via.bin.ptr, o.via.bin.size, *celer::detail::decode_keepalive());
    } else if (o.type == msgpack::type::BIN) {
      v = celer::bytes(o.via.bin.ptr, o.via.bin.size);
    } else if (o.type == msgpack::type::STR) {
      v = celer::bytes(o.via.str.ptr, o.via.str.size);
    } else {
      throw msgpack::type_error();
    }
    return o;
  }
};

template <class T>
struct pack<celer::array<T>> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::array<T>& v) const {
    return o.pack(v.raw());
  }
};
template <class T>
struct convert<celer::array<T>> {
  const msgpack::object& operator()(const msgpack::object& o, celer::array<T>& v) const {
    if (o.type != msgpack::type::BIN || o.via.bin.size % sizeof(T) != 0) throw msgpack::type_error();
    const bool aligned = reinterpret_cast<std::uintptr_t>(o.via.bin.ptr) % alignof(T) == 0;
    if (aligned && celer::detail::decode_keepalive() != nullptr) {
      v = celer::array<T>(celer::bytes(o.via.bin.ptr, o.via.bin.size, *celer::detail::decode_keepalive()));
    } else {
      // A copy: vector storage is aligned for any number type.
      v = celer::array<T>(celer::bytes(o.via.bin.ptr, o.via.bin.size));
    }
    return o;
  }
};

/// std::vector of numbers (protocol 13): packed as `bin` holding the elements' bytes in
/// native order, the layout of celer::array<T>, so a vector<float> of a million moves at
/// memory speed instead of packing a million msgpack floats; either may be read as the other.
/// Reading also takes a msgpack array of numbers (what other msgpack writers, and celer before
/// protocol 13, produce). A `bin` whose size is not a multiple of sizeof(T) is a type error.
template <class T, class Alloc>
  requires celer::detail::bulk_number<T>
struct pack<std::vector<T, Alloc>> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const std::vector<T, Alloc>& v) const {
    const auto size = v.size() * sizeof(T);
    if (size > 0xffffffffu) throw msgpack::container_size_overflow("std::vector of numbers over 4 GiB");
    o.pack_bin(static_cast<uint32_t>(size));
    o.pack_bin_body(reinterpret_cast<const char*>(v.data()), static_cast<uint32_t>(size));
    return o;
  }
};
template <class T, class Alloc>
  requires celer::detail::bulk_number<T>
struct convert<std::vector<T, Alloc>> {
  const msgpack::object& operator()(const msgpack::object& o, std::vector<T, Alloc>& v) const {
    if (o.type == msgpack::type::BIN) {
      if (o.via.bin.size % sizeof(T) != 0) throw msgpack::type_error();
      v.resize(o.via.bin.size / sizeof(T));
      if (o.via.bin.size > 0) std::memcpy(v.data(), o.via.bin.ptr, o.via.bin.size);
    } else if (o.type == msgpack::type::ARRAY) {
      v.resize(o.via.array.size);
      for (std::uint32_t i = 0; i < o.via.array.size; ++i) v[i] = o.via.array.ptr[i].as<T>();
    } else {
      throw msgpack::type_error();
    }
    return o;
  }
};

template <>
struct pack<celer::unique_id> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::unique_id& v) const {
    o.pack_array(2);
    o.pack(v.hi);
    o.pack(v.lo);
    return o;
  }
};
template <>
struct convert<celer::unique_id> {
  const msgpack::object& operator()(const msgpack::object& o, celer::unique_id& v) const {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 2) throw msgpack::type_error();
    v.hi = o.via.array.ptr[0].as<std::uint64_t>();
    v.lo = o.via.array.ptr[1].as<std::uint64_t>();
    return o;
  }
};
template <class Tag>
struct pack<celer::typed_id<Tag>> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::typed_id<Tag>& v) const {
    return o.pack(static_cast<const celer::unique_id&>(v));
  }
};
template <class Tag>
struct convert<celer::typed_id<Tag>> {
  const msgpack::object& operator()(const msgpack::object& o, celer::typed_id<Tag>& v) const {
    v = celer::typed_id<Tag>(o.as<celer::unique_id>());
    return o;
  }
};

template <>
struct pack<celer::address> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::address& v) const {
    o.pack_array(2);
    o.pack(v.id);
    o.pack(v.endpoint);
    return o;
  }
};
template <>
struct convert<celer::address> {
  const msgpack::object& operator()(const msgpack::object& o, celer::address& v) const {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 2) throw msgpack::type_error();
    v.id = o.via.array.ptr[0].as<celer::unique_id>();
    v.endpoint = o.via.array.ptr[1].as<std::string>();
    return o;
  }
};

template <class T>
struct pack<celer::object_ref<T>> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::object_ref<T>& v) const {
    celer::detail::object_escaped(v.id(), v.owner());
    o.pack_array(2);
    o.pack(v.id());
    o.pack(v.owner());
    return o;
  }
};
template <class T>
struct convert<celer::object_ref<T>> {
  const msgpack::object& operator()(const msgpack::object& o, celer::object_ref<T>& v) const {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 2) throw msgpack::type_error();
    v = celer::object_ref<T>(o.via.array.ptr[0].as<celer::object_id>(),
                             o.via.array.ptr[1].as<celer::address>());
    return o;
  }
};

template <class T>
struct pack<celer::actor_handle<T>> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::actor_handle<T>& v) const {
    return o.pack(v.id());
  }
};
template <class T>
struct convert<celer::actor_handle<T>> {
  const msgpack::object& operator()(const msgpack::object& o, celer::actor_handle<T>& v) const {
    v = celer::actor_handle<T>(o.as<celer::actor_id>());
    return o;
  }
};

} // namespace adaptor
} // MSGPACK_API_VERSION_NAMESPACE
} // namespace msgpack
