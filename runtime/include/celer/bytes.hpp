#pragma once
/// Bulk data as values: `celer::bytes` (raw bytes: files, images, serialised tensors) and
/// `celer::array<T>` (numbers: weights, gradients, samples). Both travel as msgpack `bin`, and
/// `celer::get` of a large one is a view of the object store's shared memory, not a copy.
///
///   celer::array<float> w(1 << 20);
///   auto ref = celer::put(w);                        // 4 MiB, packed straight into the store
///   const auto back = celer::get(ref);               // back.is_view(): no copy
///
/// This header needs no msgpack: a header of yours that only names these types can include
/// it (or <celer/fwd.hpp>) and leave <celer/codec.hpp> to the files that pack values.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
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

} // namespace celer
