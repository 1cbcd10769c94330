#pragma once
/// How values travel: arguments and results are msgpack. Any type msgpack can serialise
/// works — numbers, strings, vectors, maps, and your own structs with `MSGPACK_DEFINE` —
/// plus `celer::bytes` for bulk data. A std::vector of numbers (and celer::array) travels as
/// its raw bytes, so it moves at memory speed wherever it is, inside a struct too.
///
///   struct sample { std::string label; std::vector<float> x; MSGPACK_DEFINE(label, x); };
///   celer::object_ref<sample> r = celer::put(sample{"cat", {0.1f, 0.2f}});
///
/// This is the one public header that includes a third-party header, on purpose: msgpack
/// is the documented value format of the API (users write MSGPACK_DEFINE), not an
/// implementation detail. ZeroMQ, CAF and RocksDB never appear in public headers.

#include <celer/error.hpp>
#include <celer/handles.hpp>
#include <celer/ids.hpp>

#include <msgpack.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace celer {

/// A buffer of raw bytes for bulk data (tensors, files, images); travels as msgpack `bin`.
///
/// `celer::get` of a large `bytes` object (above inline_object_bytes) does not copy: the
/// result is a read-only view of the object store's shared memory (`is_view()`), which
/// stays mapped while the `bytes` (or a copy of it) lives. Read it through a const
/// `bytes` (or `view()`): the non-const `data()`, `operator[]`, `begin()` and `end()` are
/// for writing, and on a view they first copy it into memory of its own.
class bytes {
public:
  bytes() = default;
  explicit bytes(std::size_t size) : data_(size) {}
  explicit bytes(std::vector<std::uint8_t> data) : data_(std::move(data)) {}
  bytes(const void* data, std::size_t size)
    : data_(static_cast<const std::uint8_t*>(data), static_cast<const std::uint8_t*>(data) + size) {}
  explicit bytes(std::string_view s) : bytes(s.data(), s.size()) {}
  /// A view of `size` bytes at `data` that `keep` keeps valid (no copy).
  bytes(const void* data, std::size_t size, std::shared_ptr<const void> keep)
    : view_(static_cast<const std::uint8_t*>(data)), view_size_(size), keep_(std::move(keep)) {}

  [[nodiscard]] std::uint8_t* data() { return own().data(); }
  [[nodiscard]] const std::uint8_t* data() const noexcept {
    return view_ != nullptr ? view_ : data_.data();
  }
  [[nodiscard]] std::size_t size() const noexcept {
    return view_ != nullptr ? view_size_ : data_.size();
  }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  /// True when these bytes are the object store's memory, mapped without a copy.
  [[nodiscard]] bool is_view() const noexcept { return view_ != nullptr; }
  void resize(std::size_t n) { own().resize(n); }
  std::uint8_t& operator[](std::size_t i) { return own()[i]; }
  std::uint8_t operator[](std::size_t i) const noexcept { return data()[i]; }
  auto begin() { return own().begin(); }
  auto end() { return own().end(); }
  const std::uint8_t* begin() const noexcept { return data(); }
  const std::uint8_t* end() const noexcept { return data() + size(); }
  [[nodiscard]] std::string_view view() const noexcept {
    return {reinterpret_cast<const char*>(data()), size()};
  }
  friend bool operator==(const bytes& a, const bytes& b) { return a.view() == b.view(); }

private:
  std::vector<std::uint8_t>& own() {
    if (view_ != nullptr) {
      data_.assign(view_, view_ + view_size_);
      view_ = nullptr;
      view_size_ = 0;
      keep_.reset();
    }
    return data_;
  }
  std::vector<std::uint8_t> data_;
  const std::uint8_t* view_ = nullptr;
  std::size_t view_size_ = 0;
  std::shared_ptr<const void> keep_;
};

/// An array of numbers for bulk numeric data (weights, gradients, samples): stored as raw
/// bytes in native byte order (msgpack `bin`), so that `celer::get` of a large one maps the
/// object store's memory as a `const T*` without a copy (`is_view()`), like `bytes`.
///
///   celer::array<float> w(1 << 20);                 // 4 MiB of floats
///   auto ref = celer::put(w);
///   const auto back = celer::get(ref);              // a view: back.data() is in the store
template <class T>
class array {
  static_assert(std::is_arithmetic_v<T>, "celer::array holds numbers");

public:
  array() = default;
  explicit array(std::size_t n) : raw_(n * sizeof(T)) {}
  array(const T* data, std::size_t n) : raw_(data, n * sizeof(T)) {}
  explicit array(const std::vector<T>& v) : array(v.data(), v.size()) {}
  array(std::initializer_list<T> v) : array(v.begin(), v.size()) {}
  /// Wraps raw bytes (a view stays a view); their size must be a multiple of sizeof(T).
  explicit array(bytes raw) : raw_(std::move(raw)) {}

  [[nodiscard]] const T* data() const noexcept { return reinterpret_cast<const T*>(raw_.data()); }
  /// For writing; on a view, copies it first.
  [[nodiscard]] T* data() { return reinterpret_cast<T*>(raw_.data()); }
  [[nodiscard]] std::size_t size() const noexcept { return raw_.size() / sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  [[nodiscard]] bool is_view() const noexcept { return raw_.is_view(); }
  T operator[](std::size_t i) const noexcept { return data()[i]; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size(); }
  [[nodiscard]] std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }
  [[nodiscard]] const bytes& raw() const noexcept { return raw_; }
  friend bool operator==(const array& a, const array& b) { return a.raw_ == b.raw_; }

private:
  bytes raw_;
};

namespace detail {

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

} // namespace detail
} // namespace celer

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
