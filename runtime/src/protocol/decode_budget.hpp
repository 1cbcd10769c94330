#pragma once
// What one decode of a peer's message may allocate, and CELER_MSGPACK_DEFINE, which makes the
// protocol's structs charge it.
//
// msgpack lets a tiny input stand for a large value: a 1-byte empty array (0x90) where a
// struct is expected becomes a default-constructed struct of hundreds of bytes, and one
// array header of n elements makes std::vector's convert resize to n such structs before it
// reads any of them. wire::bounded_unpack therefore sets a budget for each decode, and every
// allocation the decode makes in proportion to what the peer claims is charged to it
// *before* it is made:
//   - msgpack's own object tree: each array or map's slots, as the parser meets its header
//     (wire.hpp's budgeted visitor);
//   - each std::vector or std::map member of a struct: its elements or nodes, by the counts
//     in the msgpack object, before the struct's members are converted (CELER_MSGPACK_DEFINE;
//     vectors and maps nested in them are walked too).
// A struct itself needs no charge: it is the top-level value (bounded_unpack charges it), a
// member (inside its parent), or an element of a vector (charged with the vector). Strings
// and binaries are not charged: their bytes are in the input, so they cannot amplify it.
// Outside wire::bounded_unpack no budget is set and nothing is charged (in-process values,
// user values through celer::detail::unpack).
//
//   struct store_free {
//     std::vector<object_id> ids;
//     job_id sender_job;
//     CELER_MSGPACK_DEFINE(ids, sender_job)
//   };

#include <msgpack.hpp>

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace celer::protocol {

/// Thrown when a decode would allocate more than its budget; wire::bounded_unpack turns it
/// into a resource_exhausted error. Never escapes bounded_unpack.
class decode_budget_exceeded : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The bytes a decode may still allocate. Owned by the decode that set it (on its stack).
struct decode_budget {
  std::size_t left = 0;
};

/// The budget of the decode running on this thread; null outside one (nothing is charged).
inline decode_budget*& current_decode_budget() noexcept {
  thread_local decode_budget* budget = nullptr;
  return budget;
}

/// Charges `bytes` to this thread's decode budget; throws decode_budget_exceeded (and
/// charges nothing) when fewer are left.
inline void charge_decode(std::size_t bytes) {
  decode_budget* b = current_decode_budget();
  if (b == nullptr) return;
  if (bytes > b->left) {
    throw decode_budget_exceeded("the message needs more than " + std::to_string(b->left) +
                                 " more bytes of memory to decode than its size allows");
  }
  b->left -= bytes;
}

/// Sets `b` as this thread's decode budget for the scope's lifetime (restoring the one
/// before, normally none).
class scoped_decode_budget {
public:
  explicit scoped_decode_budget(decode_budget* b) noexcept : saved_(current_decode_budget()) {
    current_decode_budget() = b;
  }
  ~scoped_decode_budget() { current_decode_budget() = saved_; }
  scoped_decode_budget(const scoped_decode_budget&) = delete;
  scoped_decode_budget& operator=(const scoped_decode_budget&) = delete;

private:
  decode_budget* saved_;
};

namespace budget_detail {

/// What a std::map node adds to its value in libstdc++ (colour and three pointers).
inline constexpr std::size_t map_node_overhead = 32;

/// What converting a msgpack object into a T allocates before anything inside it is
/// charged: nothing for scalars, strings (bounded by their input bytes) and structs (they
/// charge their own members when converted).
template <class T>
struct cost_of {
  static constexpr bool allocates = false;
  static std::size_t of(const msgpack::object&) noexcept { return 0; }
};

template <class E, class A>
struct cost_of<std::vector<E, A>> {
  static constexpr bool allocates = true;
  /// The vector's elements (convert resizes to the claimed count first), and whatever
  /// containers among them allocate. A binary (vector<char>) is not an array: 0.
  static std::size_t of(const msgpack::object& o) noexcept {
    if (o.type != msgpack::type::ARRAY) return 0;
    std::size_t total = std::size_t{o.via.array.size} * sizeof(E);
    if constexpr (cost_of<E>::allocates) {
      for (std::uint32_t i = 0; i < o.via.array.size; ++i) total += cost_of<E>::of(o.via.array.ptr[i]);
    }
    return total;
  }
};

template <class K, class V, class C, class A>
struct cost_of<std::map<K, V, C, A>> {
  static constexpr bool allocates = true;
  /// One node per claimed pair (fewer when keys repeat), and containers among keys and values.
  static std::size_t of(const msgpack::object& o) noexcept {
    if (o.type != msgpack::type::MAP) return 0;
    std::size_t total =
      std::size_t{o.via.map.size} * (sizeof(std::pair<const K, V>) + map_node_overhead);
    if constexpr (cost_of<K>::allocates || cost_of<V>::allocates) {
      for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
        total += cost_of<K>::of(o.via.map.ptr[i].key) + cost_of<V>::of(o.via.map.ptr[i].val);
      }
    }
    return total;
  }
};

/// Charges, in one step, what converting `o` (a struct encoded as an array) into members
/// of types M... will allocate for their containers.
template <class... M>
void charge_members(const msgpack::object& o, const M&...) {
  if constexpr ((cost_of<M>::allocates || ...)) {
    if (o.type != msgpack::type::ARRAY) return;  // the conversion throws type_error
    const std::size_t n = o.via.array.size;
    std::size_t i = 0;
    std::size_t total = 0;
    ((total += i < n ? cost_of<M>::of(o.via.array.ptr[i]) : 0, ++i), ...);
    if (total != 0) charge_decode(total);
  }
}

} // namespace budget_detail
} // namespace celer::protocol

/// MSGPACK_DEFINE (msgpack-c's MSGPACK_DEFINE_ARRAY: the same bytes on the wire), except
/// that converting from msgpack first charges the struct's containers to the decode budget
/// (one thread-local add per struct that has any; none for structs of scalars and strings).
/// Use it for every struct that travels in a protocol message.
#define CELER_MSGPACK_DEFINE(...)                                                            \
  template <typename Packer>                                                                 \
  void msgpack_pack(Packer& msgpack_pk) const {                                              \
    msgpack::type::make_define_array(__VA_ARGS__).msgpack_pack(msgpack_pk);                  \
  }                                                                                          \
  void msgpack_unpack(msgpack::object const& msgpack_o) {                                    \
    ::celer::protocol::budget_detail::charge_members(msgpack_o, __VA_ARGS__);                \
    msgpack::type::make_define_array(__VA_ARGS__).msgpack_unpack(msgpack_o);                 \
  }                                                                                          \
  template <typename MSGPACK_OBJECT>                                                         \
  void msgpack_object(MSGPACK_OBJECT* msgpack_o, msgpack::zone& msgpack_z) const {           \
    msgpack::type::make_define_array(__VA_ARGS__).msgpack_object(msgpack_o, msgpack_z);      \
  }
