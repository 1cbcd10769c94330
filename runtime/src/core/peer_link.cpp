// celer::peer in one process: mailboxes, and lanes of shared memory to processes of the same
// machine (peer_link.hpp).
#include "core/peer_link.hpp"

#include "log.hpp"
#include <celer/store/shm_arena.hpp>

#include <atomic>
#include <cstring>
#include <fstream>
#include <random>

#include <sys/mman.h>

namespace celer {
namespace {

/// A lane's first page: the nonce its receiver wrote (checked by the sender that maps it) and
/// the ring's tail (what the receiver has released: the sender may write up to tail + ring).
constexpr std::size_t header_bytes = 4096;
constexpr std::size_t nonce_at = 0, nonce_bytes = 16, tail_at = 64;

const std::string ask_box = std::string(peer_link::reserved_prefix) + "lane-ask";
const std::string grant_box = std::string(peer_link::reserved_prefix) + "lane-grant";

/// What a sender asks with, and what the receiver grants (peer_data payloads).
struct lane_ask {
  std::string where;  // the sender's endpoint: where the grant goes
  std::string boot_id;
  MSGPACK_DEFINE(where, boot_id)
};
struct lane_grant {
  std::string path;
  std::uint64_t ring = 0;
  std::string nonce;
  MSGPACK_DEFINE(path, ring, nonce)
};

std::string read_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

peer_link::options with_boot_id(peer_link::options o) {
  if (o.boot_id.empty()) o.boot_id = read_boot_id();
  return o;
}

/// Faults the ring's pages in now, once, rather than on the first pass of bytes through it
/// (a first 64 MiB at a few microseconds a page). Best effort: older kernels lack it.
void prefault(std::byte* base, std::size_t size) {
#ifdef MADV_POPULATE_WRITE
  (void)::madvise(base, size, MADV_POPULATE_WRITE);
#else
  (void)base;
  (void)size;
#endif
}

std::atomic_ref<std::uint64_t> tail_of(std::byte* base) {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base + tail_at));
}

template <class T>
protocol::bulk packed(const T& v) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, v);
  return protocol::bulk(std::string(buf.data(), buf.size()));
}

template <class T>
bool unpacked(const std::string& raw, T& out) {
  try {
    auto h = msgpack::unpack(raw.data(), raw.size());
    h.get().convert(out);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

} // namespace

/// The sending end of a lane: the receiver's ring mapped here, and where the next bytes go.
struct peer_link::out_lane {
  std::mutex mutex;  // one writer at a time, its notice sent before the next writes
  bool ready = false;
  store::shm_segment ring;
  std::size_t size = 0;
  std::uint64_t head = 0;  // where the next bytes go (positions only grow; the ring is pos % size)

  struct place {
    std::uint64_t claim, at;
  };
  /// Copies `payload` into the ring if it has room (skipping the ring's end when the bytes
  /// would not fit before it); nothing when full.
  std::optional<place> write(std::span<const std::byte> payload) {
    const std::uint64_t tail = tail_of(ring.base()).load(std::memory_order_acquire);
    const std::uint64_t n = payload.size(), index = head % size;
    const std::uint64_t skip = index + n > size ? size - index : 0;
    if (tail > head || head + skip + n - tail > size) return std::nullopt;  // full (or a bad tail)
    const place p{head, head + skip};
    std::memcpy(ring.base() + header_bytes + p.at % size, payload.data(), n);
    head = p.at + n;
    return p;
  }
};

/// The receiving end: the ring this process owns, what its sender has claimed, and what the
/// mailbox still holds views of.
struct peer_link::in_lane : std::enable_shared_from_this<in_lane> {
  std::mutex mutex;
  store::shm_segment ring;
  std::size_t size = 0;
  std::uint64_t claimed = 0;             // the end of the last notice's bytes
  std::map<std::uint64_t, std::uint64_t> held;  // claim -> end, for views not yet dropped

  /// The notice's bytes as a view that releases them when the last copy of it is dropped;
  /// nothing when the notice does not follow the last one or leaves the ring.
  std::optional<bytes> view(std::uint64_t claim, std::uint64_t at, std::uint64_t n) {
    std::lock_guard lock(mutex);
    const std::uint64_t tail = held.empty() ? claimed : held.begin()->first;
    if (claim != claimed || at < claim || at - claim >= size || n == 0 || n > size || at % size + n > size ||
        at + n - tail > size) {
      return std::nullopt;
    }
    held.emplace(claim, at + n);
    claimed = at + n;
    auto self = shared_from_this();
    std::shared_ptr<const void> keep(ring.base() + header_bytes + at % size,
                                     [self, claim](const void*) { self->release(claim); });
    return bytes(ring.base() + header_bytes + at % size, static_cast<std::size_t>(n), std::move(keep));
  }

  void release(std::uint64_t claim) {
    std::lock_guard lock(mutex);
    held.erase(claim);
    tail_of(ring.base()).store(held.empty() ? claimed : held.begin()->first, std::memory_order_release);
  }
};

peer_link::peer_link(transport& net, address self, job_id job, options o)
  : net_(net), self_(std::move(self)), job_(job), o_(with_boot_id(std::move(o))), mailbox_(o_.mailbox_bytes) {}

peer_link::~peer_link() = default;

bool peer_link::send(const address& to, const std::string& box, std::uint64_t seq,
                     std::span<const std::byte> payload) {
  if (to == self_) {
    return mailbox_.deposit(box, seq, std::string(reinterpret_cast<const char*>(payload.data()), payload.size()));
  }
  protocol::peer_data d;
  d.box = box;
  d.seq = seq;
  d.from = self_.id;
  if (payload.size() >= protocol::bulk::threshold && payload.size() <= o_.lane_bytes / 2) {
    if (auto lane = lane_to(to)) {
      std::lock_guard lock(lane->mutex);
      if (auto p = lane->write(payload)) {
        d.lane_claim = p->claim;
        d.lane_at = p->at;
        d.lane_size = payload.size();
        // Sent under the lane's lock: notices reach the receiver in the order of the ring.
        if (!net_.send(to, protocol::message(std::move(d)))) {
          lane->head = p->claim;  // never announced: the next notice claims these bytes again
          return false;
        }
        std::lock_guard c(mutex_);
        counters_.bytes_sent_shared += payload.size();
        return true;
      }
    }
  }
  d.payload.assign(reinterpret_cast<const char*>(payload.data()), payload.size());
  if (!net_.send(to, protocol::message(std::move(d)))) return false;
  std::lock_guard c(mutex_);
  counters_.bytes_sent_message += payload.size();
  return true;
}

std::shared_ptr<peer_link::out_lane> peer_link::lane_to(const address& to) {
  if (o_.lane_bytes == 0 || o_.boot_id.empty() || to.endpoint.empty()) return nullptr;
  std::shared_ptr<out_lane> lane;
  {
    std::lock_guard lock(mutex_);
    if (auto it = out_.find(to.id); it != out_.end()) {
      lane = it->second;
    } else {
      if (out_.size() >= o_.max_lanes) return nullptr;
      out_.emplace(to.id, std::make_shared<out_lane>());  // asked: bytes go in messages meanwhile
      lane = nullptr;
    }
  }
  if (lane == nullptr) {
    protocol::peer_data ask;
    ask.box = ask_box;
    ask.from = self_.id;
    ask.payload = packed(lane_ask{self_.endpoint, o_.boot_id});
    (void)net_.send(to, protocol::message(std::move(ask)));
    return nullptr;
  }
  std::lock_guard lock(lane->mutex);
  return lane->ready ? lane : nullptr;
}

void peer_link::on_data(protocol::peer_data& m) {
  // Only this job's processes may fill its mailboxes (nil: this process, or local).
  if (!m.sender_job.nil() && m.sender_job != job_) return;
  if (m.box.starts_with(reserved_prefix)) {
    if (m.box == ask_box) on_ask(m);
    else if (m.box == grant_box) on_grant(m);
    return;
  }
  if (m.lane_size > 0) {
    on_notice(m);
    return;
  }
  const auto n = m.payload.size();
  if (mailbox_.deposit(m.box, m.seq, std::string(std::move(m.payload)))) {
    std::lock_guard lock(mutex_);
    counters_.bytes_received_message += n;
  }
}

void peer_link::on_ask(const protocol::peer_data& m) {
  lane_ask ask;
  if (!unpacked(m.payload, ask) || ask.boot_id != o_.boot_id || o_.boot_id.empty() || o_.lane_bytes == 0) return;
  auto lane = std::make_shared<in_lane>();
  auto ring = store::shm_segment::create(header_bytes + o_.lane_bytes);
  if (!ring) {
    CELER_LOG(warn, "peer", "no shared-memory lane for a peer on this machine: " + ring.error().message());
    return;
  }
  lane->ring = std::move(*ring);
  lane->size = o_.lane_bytes;
  prefault(lane->ring.base(), lane->ring.capacity());
  lane_grant grant{lane->ring.path(), o_.lane_bytes, std::string(nonce_bytes, '\0')};
  std::random_device rd;
  for (auto& c : grant.nonce) c = static_cast<char>(rd());
  std::memcpy(lane->ring.base() + nonce_at, grant.nonce.data(), nonce_bytes);
  {
    std::lock_guard lock(mutex_);
    if (in_.size() >= o_.max_lanes && in_.find(m.from) == in_.end()) return;
    in_[m.from] = lane;  // a sender that asks again (started again) gets a new ring
    ++counters_.lanes_in;
  }
  protocol::peer_data reply;
  reply.box = grant_box;
  reply.from = self_.id;
  reply.payload = packed(grant);
  (void)net_.send(address{m.from, ask.where}, protocol::message(std::move(reply)));
}

void peer_link::on_grant(const protocol::peer_data& m) {
  std::shared_ptr<out_lane> lane;
  {
    std::lock_guard lock(mutex_);
    if (auto it = out_.find(m.from); it != out_.end()) lane = it->second;
  }
  lane_grant grant;
  if (lane == nullptr || !unpacked(m.payload, grant) || grant.ring == 0 || grant.ring != o_.lane_bytes ||
      grant.nonce.size() != nonce_bytes) {
    return;
  }
  auto ring = store::shm_segment::open(grant.path, header_bytes + grant.ring, store::shm_access::read_write);
  // The nonce proves the path is the granting process's ring (and on this machine).
  if (!ring || std::memcmp(ring->base() + nonce_at, grant.nonce.data(), nonce_bytes) != 0) return;
  prefault(ring->base(), ring->capacity());
  std::lock_guard lock(lane->mutex);
  if (lane->ready) return;
  lane->ring = std::move(*ring);
  lane->size = grant.ring;
  lane->head = 0;
  lane->ready = true;
  std::lock_guard c(mutex_);
  ++counters_.lanes_out;
}

void peer_link::on_notice(protocol::peer_data& m) {
  std::shared_ptr<in_lane> lane;
  {
    std::lock_guard lock(mutex_);
    if (auto it = in_.find(m.from); it != in_.end()) lane = it->second;
  }
  if (lane == nullptr) return;
  auto view = lane->view(m.lane_claim, m.lane_at, m.lane_size);
  if (!view) {
    CELER_LOG(warn, "peer", "dropped a peer message for mailbox " + m.box + ": its notice does not fit the lane");
    return;
  }
  if (mailbox_.deposit(m.box, m.seq, std::move(*view))) {
    std::lock_guard lock(mutex_);
    counters_.bytes_received_shared += m.lane_size;
  }
}

peer_link_counters peer_link::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

} // namespace celer
