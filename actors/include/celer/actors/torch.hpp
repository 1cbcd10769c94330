#pragma once
/// Tensors as celer objects: a `torch::Tensor` is an argument, a result or a `put` value
/// like any other, stored once and read back as a tensor over the object store's mapped
/// bytes, without a copy. The one place LibTorch meets the runtime; include it (and link
/// celer::torch) where tensors travel.
///
///   #include <celer/actors/torch.hpp>
///   torch::Tensor scale(torch::Tensor t, double by) { return t * by; }
///   CELER_REMOTE(scale);
///   ...
///   auto ref = celer::put(torch::randn({1024, 1024}));       // 4 MiB, into shared memory
///   torch::Tensor back = celer::get(ref);                    // a view of the store
///   torch::Tensor twice = celer::get(celer::task(scale).remote(back, 2.0));
///
/// Encoding (docs/objects.md, "Tensors"): one msgpack `bin` of a header padded to 64 bytes
/// (magic "celerT1", dtype, rank, sizes) and then the elements, contiguous, in native byte
/// order. A CUDA tensor is copied to the CPU first; a non-contiguous one is made contiguous.
/// Reading one from the store gives a tensor over the mapped bytes (aligned: the store puts a
/// top-level bin's body on a 64-byte boundary), which holds the mapping while it lives.
///
/// **A tensor read from the store is read-only memory** shared by every reader on the node:
/// an in-place change (`t.add_(1)`, an optimiser step on it) is a segmentation fault. Use
/// `t.clone()` (or celer::torch_io::writable(t)) for a tensor you will change. Tensors that
/// arrive inside another value, or from a message rather than the store, are copies.

#include <celer/codec.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

namespace celer::torch_io {

/// The header before a tensor's elements: "celerT1\0", dtype code (1 byte), rank (1 byte),
/// 6 bytes of zeros, then rank sizes (int64, native order), padded with zeros to a multiple
/// of 64 bytes so that the elements after it stay as aligned as the header's start.
inline constexpr char magic[8] = {'c', 'e', 'l', 'e', 'r', 'T', '1', '\0'};
inline constexpr std::size_t max_rank = 32;

[[nodiscard]] constexpr std::size_t header_bytes(std::size_t rank) noexcept {
  return (16 + 8 * rank + 63) / 64 * 64;
}

/// celer's stable dtype codes (the wire never carries at::ScalarType's own numbering).
/// -1 for a dtype celer does not carry (complex, quantised).
[[nodiscard]] int dtype_code(c10::ScalarType t) noexcept;
/// The dtype of a code; false when the code is unknown.
[[nodiscard]] bool dtype_of(int code, c10::ScalarType& out) noexcept;

/// Packs `t` (CPU, contiguous after conversion) as described above.
void encode(const at::Tensor& t, std::string& header, at::Tensor& contiguous);
/// Reads a tensor from a bin body; a view kept alive by `keep` when given and aligned, else a
/// copy. Throws msgpack::type_error when the body is not a tensor encoding.
[[nodiscard]] at::Tensor decode(const char* data, std::size_t size,
                                const std::shared_ptr<const void>* keep);

/// `t` if it owns its memory, else a copy that does: a tensor that is safe to change in place.
[[nodiscard]] at::Tensor writable(const at::Tensor& t);
/// True when `t` is a view of the object store (read-only).
[[nodiscard]] bool is_store_view(const at::Tensor& t);

} // namespace celer::torch_io

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <>
struct pack<at::Tensor> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const at::Tensor& v) const {
    if (!v.defined()) {
      o.pack_nil();
      return o;
    }
    std::string header;
    at::Tensor t;
    celer::torch_io::encode(v, header, t);
    const auto data_bytes = static_cast<std::size_t>(t.nbytes());
    if (header.size() + data_bytes > 0xffffffffu) {
      throw msgpack::container_size_overflow("a tensor over 4 GiB");
    }
    o.pack_bin(static_cast<uint32_t>(header.size() + data_bytes));
    o.pack_bin_body(header.data(), static_cast<uint32_t>(header.size()));
    if (data_bytes > 0) {
      o.pack_bin_body(static_cast<const char*>(t.data_ptr()), static_cast<uint32_t>(data_bytes));
    }
    return o;
  }
};

template <>
struct convert<at::Tensor> {
  const msgpack::object& operator()(const msgpack::object& o, at::Tensor& v) const {
    if (o.type == msgpack::type::NIL) {
      v = at::Tensor();
    } else if (o.type == msgpack::type::BIN) {
      v = celer::torch_io::decode(o.via.bin.ptr, o.via.bin.size, celer::detail::decode_keepalive());
    } else {
      throw msgpack::type_error();
    }
    return o;
  }
};

} // namespace adaptor
} // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
} // namespace msgpack
