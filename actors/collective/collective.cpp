// Collectives over a ring (<celer/actors/collective.hpp>).
#include <celer/actors/collective.hpp>

#include <celer/celer.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>

namespace celer::collective {
namespace {

using clock_type = std::chrono::steady_clock;

/// What a join got: every member's endpoint, or why not (code 0: joined).
struct join_result {
  std::uint8_t code = 0;
  std::string why;
  std::vector<peer::endpoint> members;
  MSGPACK_DEFINE(code, why, members)
};

/// Where the members of a group meet: each registers its endpoint under its rank, and
/// join returns every member's once all have come. Runs `world_size` joins at once.
class rendezvous {
public:
  explicit rendezvous(int world_size) : members_(static_cast<std::size_t>(world_size)) {}

  join_result join(int world_size, int rank, peer::endpoint where, std::int64_t timeout_ms) {
    auto refuse = [](error_code code, std::string why) {
      return join_result{static_cast<std::uint8_t>(code), std::move(why), {}};
    };
    std::unique_lock lock(mutex_);
    if (world_size != static_cast<int>(members_.size())) {
      return refuse(error_code::invalid_argument, "the group has world_size " + std::to_string(members_.size()) +
                                                    ", this member says " + std::to_string(world_size));
    }
    auto& slot = members_[static_cast<std::size_t>(rank)];
    if (!slot.nil()) return refuse(error_code::already_exists, "rank " + std::to_string(rank) + " has joined already");
    slot = std::move(where);
    ++joined_;
    changed_.notify_all();
    const auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    if (!changed_.wait_until(lock, deadline, [&] { return joined_ == members_.size(); })) {
      return refuse(error_code::deadline_exceeded, std::to_string(joined_) + " of " + std::to_string(members_.size()) +
                                                     " members joined in " + std::to_string(timeout_ms) + " ms");
    }
    return {0, "", members_};
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<peer::endpoint> members_;
  std::size_t joined_ = 0;
};

rendezvous* make_rendezvous(int world_size) { return new rendezvous(world_size); }

std::string rendezvous_name(const std::string& group) { return "celer.collective." + group; }

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

void scale_bytes(void* data, std::size_t count, group::element e, int n) {
  switch (e) {
    case group::element::f32: scale_down(static_cast<float*>(data), count, n); break;
    case group::element::f64: scale_down(static_cast<double*>(data), count, n); break;
    case group::element::i32: scale_down(static_cast<std::int32_t*>(data), count, n); break;
    case group::element::i64: scale_down(static_cast<std::int64_t*>(data), count, n); break;
    case group::element::u8: scale_down(static_cast<std::uint8_t*>(data), count, n); break;
  }
}

/// Copies a received piece to `at` (an empty piece has no data pointer to copy from).
void copy_in(std::byte* at, const celer::bytes& got) {
  if (!got.empty()) std::memcpy(at, got.data(), got.size());
}

/// [begin, end) of part `i` of `total` split into `n` parts as even as can be.
std::pair<std::size_t, std::size_t> part(std::size_t total, int n, int i) {
  const auto un = static_cast<std::size_t>(n), ui = static_cast<std::size_t>(i);
  const std::size_t base = total / un, extra = total % un;
  const std::size_t begin = ui * base + std::min(ui, extra);
  return {begin, begin + base + (ui < extra ? 1 : 0)};
}

} // namespace
} // namespace celer::collective

CELER_REMOTE(celer::collective::make_rendezvous, &celer::collective::rendezvous::join);

namespace celer::collective {

struct group::impl {
  group_options o;
  std::vector<peer::endpoint> peers;
  actor_handle<rendezvous> meeting;
  /// Collectives started: numbers each operation's messages, the same on every member.
  std::uint64_t operations = 0;
  /// Messages sent to the right and taken from the left in this operation.
  std::uint64_t sent = 0, taken = 0;
  std::string broken;
  group_counters counters;
  /// Set by abort (any thread); `aborted_why` is written once, before `aborted` is set.
  std::atomic<bool> aborted{false};
  std::atomic<bool> aborting{false};
  std::string aborted_why;

  [[nodiscard]] int right() const { return (o.rank + 1) % o.world_size; }
  [[nodiscard]] int left() const { return (o.rank + o.world_size - 1) % o.world_size; }
  /// The mailbox of the link `from` -> `to` (every member of an embedded group shares one
  /// process, so the box names both ends).
  [[nodiscard]] std::string box(int to, int from) const {
    return "celer.collective/" + o.name + "/" + std::to_string(to) + "<" + std::to_string(from);
  }
  [[nodiscard]] std::uint64_t seq(std::uint64_t k) const { return (operations << 32) | k; }

  expected<void> begin(const char* what) {
    if (broken.empty() && aborted.load(std::memory_order_acquire)) broken = "aborted: " + aborted_why;
    if (!broken.empty()) {
      return error(error_code::failed_precondition,
                   "collective group " + o.name + " is broken (" + broken + "): its members must join again");
    }
    (void)what;
    ++operations;
    ++counters.operations;
    sent = taken = 0;
    return {};
  }

  expected<void> send_right(const void* data, std::size_t bytes) {
    auto ok = peer::send(peers[static_cast<std::size_t>(right())], box(right(), o.rank), seq(sent++),
                         {static_cast<const std::byte*>(data), bytes});
    if (!ok) return fail(ok.error(), "sending to rank " + std::to_string(right()));
    counters.bytes_sent += bytes;
    return {};
  }

  expected<celer::bytes> take_left(std::size_t expected_bytes) {
    // The wait is cut in slices so that abort, from another thread, is seen within one: the
    // mailbox wakes its taker only for a message. A slice that ends leaves the (box, seq)
    // to be taken by the next.
    constexpr auto slice = std::chrono::milliseconds(10);
    const auto deadline = clock_type::now() + o.timeout;
    const std::uint64_t want = seq(taken++);
    expected<celer::bytes> got = error(error_code::deadline_exceeded, "");
    for (;;) {
      if (aborted.load(std::memory_order_acquire))
        return fail(error(error_code::cancelled, "aborted: " + aborted_why), "waiting for rank " + std::to_string(left()));
      const auto left_time = deadline - clock_type::now();
      got = peer::receive(box(o.rank, left()), want,
                          std::max<std::chrono::nanoseconds>(std::chrono::nanoseconds(0), std::min<std::chrono::nanoseconds>(left_time, slice)));
      if (got || got.error().code() != error_code::deadline_exceeded || left_time <= slice) break;
    }
    if (!got) return fail(got.error(), "waiting for rank " + std::to_string(left()));
    if (got->size() != expected_bytes) {
      return fail(error(error_code::invalid_argument,
                        "rank " + std::to_string(left()) + " sent " + std::to_string(got->size()) + " bytes where " +
                          std::to_string(expected_bytes) + " were expected: the members called different collectives "
                                                           "or sizes"),
                  "in the ring");
    }
    counters.bytes_received += got->size();
    return got;
  }

  error fail(const error& e, const std::string& doing) {
    broken = "rank " + std::to_string(o.rank) + ", operation " + std::to_string(operations) + ", " + doing + ": " +
             e.message();
    peer::close(box(o.rank, left()));
    return error(e.code(), "collective group " + o.name + ": " + broken);
  }

  /// The pieces of `bytes` bytes (whole elements of `unit` bytes) a part is sent in: at
  /// least one, maybe empty, so that every step is a message and the ring keeps in step.
  [[nodiscard]] std::vector<std::pair<std::size_t, std::size_t>> pieces(std::size_t begin, std::size_t end,
                                                                         std::size_t unit) const {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    const std::size_t per = std::max<std::size_t>(1, o.chunk_bytes / unit);
    for (std::size_t at = begin; at < end; at += per) out.emplace_back(at, std::min(end, at + per));
    if (out.empty()) out.emplace_back(begin, begin);
    return out;
  }
};

group::group(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
group::group(group&&) noexcept = default;
group& group::operator=(group&&) noexcept = default;

group::~group() {
  if (!impl_) return;
  if (impl_->o.rank == 0) {
    try {
      kill(impl_->meeting);
    } catch (const std::exception&) {  // the runtime is gone already: so is the actor
    }
  }
}

int group::rank() const noexcept { return impl_->o.rank; }
int group::size() const noexcept { return impl_->o.world_size; }
group_counters group::counters() const noexcept { return impl_->counters; }

expected<group> group::join(group_options o) {
  if (o.name.empty()) return error(error_code::invalid_argument, "a collective group needs a name");
  if (o.world_size < 1) return error(error_code::invalid_argument, "a collective group needs world_size >= 1");
  if (o.rank < 0 || o.rank >= o.world_size) {
    return error(error_code::invalid_argument, "rank " + std::to_string(o.rank) + " is outside world_size " +
                                                 std::to_string(o.world_size));
  }
  if (o.chunk_bytes == 0 || o.chunk_bytes > peer::max_payload) {
    return error(error_code::invalid_argument, "chunk_bytes must be above 0 and at most celer::peer::max_payload (" +
                                                 std::to_string(peer::max_payload) + " bytes), not " +
                                                 std::to_string(o.chunk_bytes));
  }
  auto here = peer::here();
  if (!here) return here.error();
  auto p = std::make_unique<impl>();
  p->o = o;
  try {
    try {
      p->meeting = celer::actor(make_rendezvous)
                     .options({.name = rendezvous_name(o.name), .max_concurrency = o.world_size + 1})
                     .remote(o.world_size);
    } catch (const exception& e) {
      if (e.code() != error_code::already_exists) throw;
      p->meeting = celer::get_actor<rendezvous>(rendezvous_name(o.name));  // another member made it
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(o.timeout).count();
    auto joined = celer::get(p->meeting.task(&rendezvous::join).remote(o.world_size, o.rank, *here, ms));
    if (joined.code != 0) {
      return error(static_cast<error_code>(joined.code),
                   "joining collective group " + o.name + " as rank " + std::to_string(o.rank) + ": " + joined.why);
    }
    p->peers = std::move(joined.members);
  } catch (const exception& e) {
    return error(e.code(), "joining collective group " + o.name + " as rank " + std::to_string(o.rank) + ": " + e.what());
  }
  return group(std::move(p));
}

expected<void> group::allreduce_bytes(void* data, std::size_t count, element type, op how) {
  auto& g = *impl_;
  if (auto ok = g.begin("allreduce"); !ok) return ok;
  const int n = g.o.world_size;
  if (n == 1) return {};
  const std::size_t unit = size_of(type);
  auto* base = static_cast<std::byte*>(data);
  // A ring: reduce-scatter (n-1 steps: part (rank - s - 1) arrives and is added), then
  // allgather (n-1 steps: part (rank - s) arrives whole). What arrives at one step is what
  // is sent at the next, so each piece goes on as soon as it is in.
  auto part_of = [&](int step) {
    const int r = g.o.rank;
    const int which = step < n - 1 ? (r - step - 1) : (r - (step - (n - 1)));
    return part(count, n, ((which % n) + n) % n);
  };
  const auto [b0, e0] = part(count, n, g.o.rank);
  for (const auto& [b, e] : g.pieces(b0, e0, unit))
    if (auto ok = g.send_right(base + b * unit, (e - b) * unit); !ok) return ok;
  const int steps = 2 * (n - 1);
  for (int s = 0; s < steps; ++s) {
    const auto [b1, e1] = part_of(s);
    for (const auto& [b, e] : g.pieces(b1, e1, unit)) {
      auto got = g.take_left((e - b) * unit);
      if (!got) return got.error();
      if (s < n - 1) combine_bytes(base + b * unit, got->data(), e - b, type, how);
      else copy_in(base + b * unit, *got);
      if (s + 1 < steps)
        if (auto ok = g.send_right(base + b * unit, (e - b) * unit); !ok) return ok;
    }
  }
  if (how == op::mean) scale_bytes(data, count, type, n);
  return {};
}

expected<void> group::broadcast_bytes(void* data, std::size_t bytes, int root) {
  auto& g = *impl_;
  if (root < 0 || root >= g.o.world_size) {
    return error(error_code::invalid_argument, "broadcast root " + std::to_string(root) + " is outside the group");
  }
  if (auto ok = g.begin("broadcast"); !ok) return ok;
  if (g.o.world_size == 1) return {};
  auto* base = static_cast<std::byte*>(data);
  const bool last = g.right() == root;  // the end of the chain: forwards nothing
  for (const auto& [b, e] : g.pieces(0, bytes, 1)) {
    if (g.o.rank != root) {
      auto got = g.take_left(e - b);
      if (!got) return got.error();
      copy_in(base + b, *got);
    }
    if (!last)
      if (auto ok = g.send_right(base + b, e - b); !ok) return ok;
  }
  return {};
}

expected<void> group::allgather_bytes(const void* mine, std::size_t bytes, void* out) {
  auto& g = *impl_;
  if (auto ok = g.begin("allgather"); !ok) return ok;
  const int n = g.o.world_size;
  auto* all = static_cast<std::byte*>(out);
  auto block = [&](int r) { return all + static_cast<std::size_t>((r % n + n) % n) * bytes; };
  if (bytes > 0) std::memcpy(block(g.o.rank), mine, bytes);
  if (n == 1) return {};
  for (const auto& [b, e] : g.pieces(0, bytes, 1))
    if (auto ok = g.send_right(block(g.o.rank) + b, e - b); !ok) return ok;
  for (int s = 0; s < n - 1; ++s) {
    std::byte* arriving = block(g.o.rank - s - 1);
    for (const auto& [b, e] : g.pieces(0, bytes, 1)) {
      auto got = g.take_left(e - b);
      if (!got) return got.error();
      copy_in(arriving + b, *got);
      if (s + 1 < n - 1)
        if (auto ok = g.send_right(arriving + b, e - b); !ok) return ok;
    }
  }
  return {};
}

void group::abort(const std::string& reason) {
  auto& g = *impl_;
  if (g.aborting.exchange(true)) return;
  g.aborted_why = reason;
  g.aborted.store(true, std::memory_order_release);
}

expected<void> group::barrier() {
  std::uint8_t token = 0;
  return allreduce(std::span<std::uint8_t>(&token, 1), op::max);
}

} // namespace celer::collective
