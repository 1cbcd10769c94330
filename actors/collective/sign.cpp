// group::allreduce_sign: 1-bit compressed allreduce with error feedback (sign.hpp).
#include "sign.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace celer::collective {

sign_feedback::sign_feedback() : state_(std::make_unique<state>()) {}
sign_feedback::sign_feedback(sign_feedback&&) noexcept = default;
sign_feedback& sign_feedback::operator=(sign_feedback&&) noexcept = default;
sign_feedback::~sign_feedback() = default;
void sign_feedback::reset() noexcept { *state_ = state{}; }

namespace detail {
namespace {

/// The mailbox of messages from member `from` to member `to`.
std::string sign_box(const member_state& s, int to, int from) {
  return "celer.collective/" + s.o.name + "/sign/" + std::to_string(to) + "<" + std::to_string(from);
}

/// Bytes of a packet of `m` values on the wire: its signs, then its scales (native floats).
std::size_t wire_size(std::size_t m, std::size_t block) { return (m + 7) / 8 + (m + block - 1) / block * sizeof(float); }

std::vector<std::byte> encode(const trainer::sign_packet& p) {
  std::vector<std::byte> out(p.signs.size() + p.scales.size() * sizeof(float));
  if (!p.signs.empty()) std::memcpy(out.data(), p.signs.data(), p.signs.size());
  if (p.scales.size() > 0) std::memcpy(out.data() + p.signs.size(), p.scales.data(), p.scales.size() * sizeof(float));
  return out;
}

trainer::sign_packet decode(const std::vector<std::byte>& in, std::size_t m, std::size_t block) {
  trainer::sign_packet p;
  p.size = m;
  p.block_size = static_cast<std::uint32_t>(block);
  const std::size_t signs = (m + 7) / 8;
  p.signs = celer::bytes(in.data(), signs);
  p.scales = celer::array<float>(celer::bytes(in.data() + signs, in.size() - signs));
  return p;
}

/// The message sequence of piece `k` of phase `phase` (0: parts to their owners, 1: the
/// owners' averages to everyone) in the operation under way.
std::uint64_t sequence(const member_state& s, std::uint64_t phase, std::uint64_t k) {
  return (s.operations << 32) | (phase << 24) | k;
}

/// Sends `buffer` to member `to`, in pieces of at most chunk_bytes (at least one).
expected<void> send_to(member_state& s, int to, std::uint64_t phase, const std::vector<std::byte>& buffer) {
  const std::string box = sign_box(s, to, s.o.rank);
  std::uint64_t k = 0;
  std::size_t at = 0;
  do {
    const std::size_t piece = std::min(s.o.chunk_bytes, buffer.size() - at);
    auto ok = peer::send(s.peers[static_cast<std::size_t>(to)], box, sequence(s, phase, k++), {buffer.data() + at, piece});
    if (!ok) return s.fail(ok.error(), "sending to rank " + std::to_string(to));
    s.counters.bytes_sent += piece;
    at += piece;
  } while (at < buffer.size());
  return {};
}

/// Takes the `total` bytes member `from` sends in phase `phase`.
expected<std::vector<std::byte>> take_from(member_state& s, int from, std::uint64_t phase, std::size_t total) {
  const std::string box = sign_box(s, s.o.rank, from);
  std::vector<std::byte> out;
  out.reserve(total);
  std::uint64_t k = 0;
  do {
    const std::size_t piece = std::min(s.o.chunk_bytes, total - out.size());
    auto got = s.receive(box, sequence(s, phase, k++));
    if (!got) return s.fail(got.error(), "waiting for rank " + std::to_string(from));
    if (got->size() != piece) {
      return s.fail(error(error_code::invalid_argument, "rank " + std::to_string(from) + " sent " +
                                                          std::to_string(got->size()) + " bytes where " +
                                                          std::to_string(piece) + " were expected: the members called "
                                                                                  "different collectives or sizes"),
                    "in allreduce_sign");
    }
    const auto* b = reinterpret_cast<const std::byte*>(got->data());
    out.insert(out.end(), b, b + got->size());
    s.counters.bytes_received += got->size();
  } while (out.size() < total);
  return out;
}

} // namespace

expected<void> sign_allreduce(member_state& s, std::span<float> data, sign_feedback::state& f,
                              std::size_t block_size) {
  const int n = s.o.world_size, r = s.o.rank;
  const std::size_t count = data.size();
  if (block_size == 0) return error(error_code::invalid_argument, "allreduce_sign needs a block_size above 0");
  if (count < static_cast<std::size_t>(n)) {
    return error(error_code::invalid_argument, "allreduce_sign needs at least one value per member: " +
                                                 std::to_string(count) + " values, " + std::to_string(n) + " members");
  }
  if (f.members != 0 && (f.size != count || f.block_size != block_size || f.members != n || f.rank != r)) {
    return error(error_code::invalid_argument,
                 "this sign_feedback was first used for " + std::to_string(f.size) + " values in blocks of " +
                   std::to_string(f.block_size) + " (now " + std::to_string(count) + " in blocks of " +
                   std::to_string(block_size) + "): one feedback per tensor");
  }
  for (float v : data)
    if (!std::isfinite(v)) return error(error_code::invalid_argument, "allreduce_sign got a value that is not finite");
  if (n == 1) return {};
  if (f.members == 0) {
    for (int p = 0; p < n; ++p) {
      const auto [b, e] = part(count, n, p);
      auto c = trainer::sign_compressor::make(e - b, {.block_size = block_size});
      if (!c) return c.error();
      f.mine.push_back(std::move(*c));
    }
    const auto [b, e] = part(count, n, r);
    auto c = trainer::sign_compressor::make(e - b, {.block_size = block_size});
    if (!c) return c.error();
    f.owned.emplace(std::move(*c));
    f.size = count;
    f.block_size = block_size;
    f.members = n;
    f.rank = r;
  }
  if (!s.sign_inboxes) {
    for (int q = 0; q < n; ++q)
      if (q != r) s.inboxes.push_back(sign_box(s, r, q));
    s.sign_inboxes = true;
  }
  auto slice = [&](int p) {
    const auto [b, e] = part(count, n, p);
    return data.subspan(b, e - b);
  };
  // 1. Part p of this member's values, compressed with its error feedback, to member p.
  std::optional<trainer::sign_packet> kept;
  for (int k = 1; k <= n; ++k) {
    const int p = (r + k) % n;  // the others first, starting after this member: spread the load
    auto packet = f.mine[static_cast<std::size_t>(p)].compress(slice(p));
    if (!packet) return s.fail(packet.error(), "compressing part " + std::to_string(p));
    if (p == r) {
      kept = std::move(*packet);
    } else if (auto ok = send_to(s, p, /*phase=*/0, encode(*packet)); !ok) {
      return ok;
    }
  }
  // 2. The average of this member's part, over the members in rank order (a fixed order: the
  // same bits however the pieces arrived), compressed with the owner's error feedback.
  const auto own = slice(r);
  std::vector<float> average(own.size(), 0.0f);
  const float weight = 1.0f / static_cast<float>(n);
  for (int q = 0; q < n; ++q) {
    expected<void> added;
    if (q == r) {
      added = trainer::accumulate_into(*kept, average, weight);
    } else {
      auto got = take_from(s, q, /*phase=*/0, wire_size(own.size(), block_size));
      if (!got) return got.error();
      added = trainer::accumulate_into(decode(*got, own.size(), block_size), average, weight);
    }
    if (!added) return s.fail(added.error(), "decoding rank " + std::to_string(q) + "'s part");
  }
  auto reduced = f.owned->compress(average);
  if (!reduced) return s.fail(reduced.error(), "compressing the average");
  // 3. Everyone, this member included, takes the decoded average: the same bits everywhere.
  if (auto ok = trainer::decompress(*reduced, own); !ok) return s.fail(ok.error(), "decoding the average");
  const auto wire = encode(*reduced);
  for (int k = 1; k < n; ++k)
    if (auto ok = send_to(s, (r + k) % n, /*phase=*/1, wire); !ok) return ok;
  for (int k = 1; k < n; ++k) {
    const int q = (r + n - k) % n;
    auto into = slice(q);
    auto got = take_from(s, q, /*phase=*/1, wire_size(into.size(), block_size));
    if (!got) return got.error();
    if (auto ok = trainer::decompress(decode(*got, into.size(), block_size), into); !ok) {
      return s.fail(ok.error(), "decoding rank " + std::to_string(q) + "'s average");
    }
  }
  return {};
}

} // namespace detail
} // namespace celer::collective
