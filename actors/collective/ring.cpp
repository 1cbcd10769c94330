// A ring of a group's members (ring.hpp): the pipelined ring collectives.
#include "ring.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace celer::collective::detail {
namespace {

/// dst[i] = dst[i] (how) src[i], for `count` elements of type `type`.
template <class T>
void combine(T* dst, const T* src, std::size_t count, op how) {
  switch (how) {
    case op::sum:
    case op::mean:
      for (std::size_t i = 0; i < count; ++i) dst[i] = static_cast<T>(dst[i] + src[i]);
      break;
    case op::min:
      for (std::size_t i = 0; i < count; ++i) dst[i] = std::min(dst[i], src[i]);
      break;
    case op::max:
      for (std::size_t i = 0; i < count; ++i) dst[i] = std::max(dst[i], src[i]);
      break;
  }
}

template <class T>
void scale_down(T* data, std::size_t count, int n) {
  for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<T>(data[i] / static_cast<T>(n));
}

} // namespace

std::size_t size_of(group::element e) {
  switch (e) {
    case group::element::f32: return 4;
    case group::element::f64: return 8;
    case group::element::i32: return 4;
    case group::element::i64: return 8;
    case group::element::u8: return 1;
  }
  return 1;
}

namespace {

/// Combines `count` elements at `src` (any alignment) into `dst`.
void combine_bytes(void* dst, const void* src, std::size_t count, group::element e, op how) {
  if (count == 0) return;
  // The received bytes are a std::string's: aligned for every element type here. Copy
  // otherwise (a view of a frame might not be).
  std::vector<std::uint64_t> aligned;
  if (reinterpret_cast<std::uintptr_t>(src) % 8 != 0) {
    aligned.resize((count * size_of(e) + 7) / 8);
    std::memcpy(aligned.data(), src, count * size_of(e));
    src = aligned.data();
  }
  switch (e) {
    case group::element::f32: combine(static_cast<float*>(dst), static_cast<const float*>(src), count, how); break;
    case group::element::f64: combine(static_cast<double*>(dst), static_cast<const double*>(src), count, how); break;
    case group::element::i32:
      combine(static_cast<std::int32_t*>(dst), static_cast<const std::int32_t*>(src), count, how);
      break;
    case group::element::i64:
      combine(static_cast<std::int64_t*>(dst), static_cast<const std::int64_t*>(src), count, how);
      break;
    case group::element::u8:
      combine(static_cast<std::uint8_t*>(dst), static_cast<const std::uint8_t*>(src), count, how);
      break;
  }
}

} // namespace

void scale_bytes(void* data, std::size_t count, group::element e, int n) {
  switch (e) {
    case group::element::f32: scale_down(static_cast<float*>(data), count, n); break;
    case group::element::f64: scale_down(static_cast<double*>(data), count, n); break;
    case group::element::i32: scale_down(static_cast<std::int32_t*>(data), count, n); break;
    case group::element::i64: scale_down(static_cast<std::int64_t*>(data), count, n); break;
    case group::element::u8: scale_down(static_cast<std::uint8_t*>(data), count, n); break;
  }
}

namespace {

/// Copies a received piece to `at` (an empty piece has no data pointer to copy from).
void copy_in(std::byte* at, const celer::bytes& got) {
  if (!got.empty()) std::memcpy(at, got.data(), got.size());
}

} // namespace

/// [begin, end) of part `i` of `total` split into `n` parts as even as can be.
std::pair<std::size_t, std::size_t> part(std::size_t total, int n, int i) {
  const auto un = static_cast<std::size_t>(n), ui = static_cast<std::size_t>(i);
  const std::size_t base = total / un, extra = total % un;
  const std::size_t begin = ui * base + std::min(ui, extra);
  return {begin, begin + base + (ui < extra ? 1 : 0)};
}


expected<void> member_state::begin() {
  if (broken.empty() && aborted.load(std::memory_order_acquire)) broken = "aborted: " + aborted_why;
  if (!broken.empty()) {
    return error(error_code::failed_precondition,
                 "collective group " + o.name + " is broken (" + broken + "): its members must join again");
  }
  ++operations;
  ++counters.operations;
  return {};
}

expected<celer::bytes> member_state::receive(const std::string& box, std::uint64_t seq) {
  constexpr std::chrono::nanoseconds slice = std::chrono::milliseconds(10);
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  for (;;) {
    if (aborted.load(std::memory_order_acquire)) return error(error_code::cancelled, "aborted: " + aborted_why);
    const auto left = deadline - std::chrono::steady_clock::now();
    auto got = peer::receive(box, seq, std::clamp(left, std::chrono::nanoseconds(0), slice));
    // A slice that ends leaves the (box, seq) for the next one to take.
    if (got || got.error().code() != error_code::deadline_exceeded || left <= slice) return got;
  }
}

error member_state::fail(const error& e, const std::string& doing) {
  broken = "rank " + std::to_string(o.rank) + ", operation " + std::to_string(operations) + ", " + doing + ": " +
           e.message();
  for (const auto& box : inboxes) peer::close(box);
  return error(e.code(), "collective group " + o.name + ": " + broken);
}

ring::ring(member_state& state, std::string tag, std::vector<int> ranks, int position)
  : state_(&state), tag_(std::move(tag)), ranks_(std::move(ranks)), position_(position) {
  state_->inboxes.push_back(box(position_, left()));
}

std::string ring::box(int to, int from) const {
  // Every member of an embedded group shares one process, so the box names both ends.
  return "celer.collective/" + state_->o.name + "/" + tag_ + "/" + std::to_string(ranks_[static_cast<std::size_t>(to)]) +
         "<" + std::to_string(ranks_[static_cast<std::size_t>(from)]);
}

void ring::catch_up() {
  if (operation_ == state_->operations) return;
  operation_ = state_->operations;
  sent_ = taken_ = 0;
}

expected<void> ring::send_right(const void* data, std::size_t bytes) {
  const int to = ranks_[static_cast<std::size_t>(right())];
  auto ok = peer::send(state_->peers[static_cast<std::size_t>(to)], box(right(), position_),
                       (operation_ << 32) | sent_++, {static_cast<const std::byte*>(data), bytes});
  if (!ok) return state_->fail(ok.error(), "sending to rank " + std::to_string(to));
  state_->counters.bytes_sent += bytes;
  return {};
}

expected<celer::bytes> ring::take_left(std::size_t expected_bytes) {
  const int from = ranks_[static_cast<std::size_t>(left())];
  auto got = state_->receive(box(position_, left()), (operation_ << 32) | taken_++);
  if (!got) return state_->fail(got.error(), "waiting for rank " + std::to_string(from));
  if (got->size() != expected_bytes) {
    return state_->fail(error(error_code::invalid_argument,
                              "rank " + std::to_string(from) + " sent " + std::to_string(got->size()) + " bytes where " +
                                std::to_string(expected_bytes) +
                                " were expected: the members called different collectives or sizes"),
                        "in the ring");
  }
  state_->counters.bytes_received += got->size();
  return got;
}

std::vector<std::pair<std::size_t, std::size_t>> ring::pieces(std::size_t begin, std::size_t end,
                                                              std::size_t unit) const {
  // At least one piece, maybe empty, so that every step is a message and the ring keeps in step.
  std::vector<std::pair<std::size_t, std::size_t>> out;
  const std::size_t per = std::max<std::size_t>(1, state_->o.chunk_bytes / unit);
  for (std::size_t at = begin; at < end; at += per) out.emplace_back(at, std::min(end, at + per));
  if (out.empty()) out.emplace_back(begin, begin);
  return out;
}

expected<void> ring::allreduce(void* data, std::size_t count, group::element type, op how) {
  catch_up();
  const int n = size();
  if (n == 1) return {};
  const std::size_t unit = size_of(type);
  auto* base = static_cast<std::byte*>(data);
  // Reduce-scatter (n-1 steps: part (position - s - 1) arrives and is added), then allgather
  // (n-1 steps: part (position - s) arrives whole). What arrives at one step is what is sent
  // at the next, so each piece goes on as soon as it is in.
  auto part_of = [&](int step) {
    const int which = step < n - 1 ? (position_ - step - 1) : (position_ - (step - (n - 1)));
    return part(count, n, ((which % n) + n) % n);
  };
  const auto [b0, e0] = part(count, n, position_);
  for (const auto& [b, e] : pieces(b0, e0, unit))
    if (auto ok = send_right(base + b * unit, (e - b) * unit); !ok) return ok;
  const int steps = 2 * (n - 1);
  for (int s = 0; s < steps; ++s) {
    const auto [b1, e1] = part_of(s);
    for (const auto& [b, e] : pieces(b1, e1, unit)) {
      auto got = take_left((e - b) * unit);
      if (!got) return got.error();
      if (s < n - 1) combine_bytes(base + b * unit, got->data(), e - b, type, how);
      else copy_in(base + b * unit, *got);
      if (s + 1 < steps)
        if (auto ok = send_right(base + b * unit, (e - b) * unit); !ok) return ok;
    }
  }
  return {};
}

expected<void> ring::broadcast(void* data, std::size_t bytes, int root) {
  catch_up();
  if (size() == 1) return {};
  auto* base = static_cast<std::byte*>(data);
  const bool last = right() == root;  // the end of the chain: forwards nothing
  for (const auto& [b, e] : pieces(0, bytes, 1)) {
    if (position_ != root) {
      auto got = take_left(e - b);
      if (!got) return got.error();
      copy_in(base + b, *got);
    }
    if (!last)
      if (auto ok = send_right(base + b, e - b); !ok) return ok;
  }
  return {};
}

expected<void> ring::allgather(const void* mine, std::size_t bytes, void* out) {
  catch_up();
  const int n = size();
  auto* all = static_cast<std::byte*>(out);
  auto block = [&](int r) { return all + static_cast<std::size_t>((r % n + n) % n) * bytes; };
  if (bytes > 0) std::memcpy(block(position_), mine, bytes);
  if (n == 1) return {};
  for (const auto& [b, e] : pieces(0, bytes, 1))
    if (auto ok = send_right(block(position_) + b, e - b); !ok) return ok;
  for (int s = 0; s < n - 1; ++s) {
    std::byte* arriving = block(position_ - s - 1);
    for (const auto& [b, e] : pieces(0, bytes, 1)) {
      auto got = take_left(e - b);
      if (!got) return got.error();
      copy_in(arriving + b, *got);
      if (s + 1 < n - 1)
        if (auto ok = send_right(arriving + b, e - b); !ok) return ok;
    }
  }
  return {};
}

} // namespace celer::collective::detail
