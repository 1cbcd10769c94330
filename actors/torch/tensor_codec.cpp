// Tensors to and from celer's value encoding (<celer/actors/torch.hpp>).
#include <celer/actors/torch.hpp>

#include <torch/torch.h>

#include <array>
#include <utility>

namespace celer::torch_io {
namespace {

constexpr std::array<std::pair<c10::ScalarType, int>, 10> codes{{
  {c10::ScalarType::Float, 0},
  {c10::ScalarType::Double, 1},
  {c10::ScalarType::Half, 2},
  {c10::ScalarType::BFloat16, 3},
  {c10::ScalarType::Char, 4},
  {c10::ScalarType::Byte, 5},
  {c10::ScalarType::Short, 6},
  {c10::ScalarType::Int, 7},
  {c10::ScalarType::Long, 8},
  {c10::ScalarType::Bool, 9},
}};

/// What a view's deleter holds: the store mapping, kept while the tensor lives.
struct store_hold {
  std::shared_ptr<const void> keep;
};

void release_hold(void* ctx) { delete static_cast<store_hold*>(ctx); }

} // namespace

int dtype_code(c10::ScalarType t) noexcept {
  for (const auto& [type, code] : codes) {
    if (type == t) return code;
  }
  return -1;
}

bool dtype_of(int code, c10::ScalarType& out) noexcept {
  for (const auto& [type, c] : codes) {
    if (c == code) {
      out = type;
      return true;
    }
  }
  return false;
}

void encode(const at::Tensor& t_in, std::string& header, at::Tensor& t) {
  t = t_in.device().is_cpu() ? t_in : t_in.to(torch::kCPU);
  t = t.contiguous();
  const int code = dtype_code(t.scalar_type());
  if (code < 0) {
    throw std::invalid_argument(std::string("celer cannot carry tensors of dtype ") +
                                c10::toString(t.scalar_type()) +
                                " (float, double, half, bfloat16, int8/16/32/64, uint8, bool)");
  }
  const auto rank = static_cast<std::size_t>(t.dim());
  if (rank > max_rank) throw std::invalid_argument("celer carries tensors of rank up to 32");
  header.assign(header_bytes(rank), '\0');
  std::memcpy(header.data(), magic, sizeof magic);
  header[8] = static_cast<char>(code);
  header[9] = static_cast<char>(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t d = t.size(static_cast<std::int64_t>(i));
    std::memcpy(header.data() + 16 + 8 * i, &d, sizeof d);
  }
}

at::Tensor decode(const char* data, std::size_t size, const std::shared_ptr<const void>* keep) {
  if (size < 16 || std::memcmp(data, magic, sizeof magic) != 0) throw msgpack::type_error();
  c10::ScalarType type{};
  if (!dtype_of(static_cast<unsigned char>(data[8]), type)) throw msgpack::type_error();
  const auto rank = static_cast<std::size_t>(static_cast<unsigned char>(data[9]));
  if (rank > max_rank || size < header_bytes(rank)) throw msgpack::type_error();
  std::vector<std::int64_t> sizes(rank);
  std::size_t elements = 1;
  for (std::size_t i = 0; i < rank; ++i) {
    std::memcpy(&sizes[i], data + 16 + 8 * i, sizeof(std::int64_t));
    if (sizes[i] < 0) throw msgpack::type_error();
    // Bounded by the body's size below; checked here so the product cannot overflow.
    if (sizes[i] > 0 && elements > size / static_cast<std::size_t>(sizes[i])) throw msgpack::type_error();
    elements *= static_cast<std::size_t>(sizes[i]);
  }
  const std::size_t element_size = c10::elementSize(type);
  const char* elements_at = data + header_bytes(rank);
  if (size - header_bytes(rank) != elements * element_size) throw msgpack::type_error();
  const auto options = torch::TensorOptions().dtype(type);
  const bool aligned = reinterpret_cast<std::uintptr_t>(elements_at) % element_size == 0;
  if (keep != nullptr && *keep && aligned && elements > 0) {
    // The storage's deleter releases the mapping; is_store_view recognises it by that deleter.
    // The memory is read-only (see the header): const_cast only because DataPtr wants void*.
    c10::DataPtr ptr(const_cast<char*>(elements_at), new store_hold{*keep}, &release_hold,
                     c10::Device(c10::kCPU));
    c10::Storage storage(c10::Storage::use_byte_size_t(), elements * element_size, std::move(ptr),
                         /*allocator=*/nullptr, /*resizable=*/false);
    std::vector<std::int64_t> strides(rank, 1);
    for (std::size_t i = rank; i-- > 1;) strides[i - 1] = strides[i] * sizes[i];
    return torch::empty({0}, options).set_(std::move(storage), 0, sizes, strides);
  }
  at::Tensor out = torch::empty(sizes, options);
  if (elements > 0) std::memcpy(out.data_ptr(), elements_at, elements * element_size);
  return out;
}

at::Tensor writable(const at::Tensor& t) { return is_store_view(t) ? t.clone() : t; }

bool is_store_view(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.storage().data_ptr().get_deleter() == &release_hold;
}

} // namespace celer::torch_io
