// Collectives over a ring (<celer/actors/collective.hpp>).
#include <celer/actors/collective.hpp>

#include "ring.hpp"
#include "sign.hpp"

#include <celer/celer.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

namespace celer::collective {
namespace {

using clock_type = std::chrono::steady_clock;

/// What a join got: every member's endpoint and locality (its node's id, its label, or
/// empty for a flat group), or why not (code 0: joined).
struct join_result {
  std::uint8_t code = 0;
  std::string why;
  std::vector<peer::endpoint> members;
  std::vector<std::string> localities;
  MSGPACK_DEFINE(code, why, members, localities)
};

/// Where the members of a group meet: each registers its endpoint under its rank, and
/// join returns every member's once all have come. Runs `world_size` joins at once.
class rendezvous {
public:
  explicit rendezvous(int world_size)
    : members_(static_cast<std::size_t>(world_size)), localities_(static_cast<std::size_t>(world_size)) {}

  join_result join(int world_size, int rank, peer::endpoint where, int layout, std::string locality,
                   std::int64_t timeout_ms) {
    auto refuse = [](error_code code, std::string why) {
      return join_result{static_cast<std::uint8_t>(code), std::move(why), {}, {}};
    };
    std::unique_lock lock(mutex_);
    if (world_size != static_cast<int>(members_.size())) {
      return refuse(error_code::invalid_argument, "the group has world_size " + std::to_string(members_.size()) +
                                                    ", this member says " + std::to_string(world_size));
    }
    if (layout_ && *layout_ != layout) {
      return refuse(error_code::invalid_argument, "the group's members asked for different hierarchies (" +
                                                    std::to_string(*layout_) + " and " + std::to_string(layout) + ")");
    }
    layout_ = layout;
    auto& slot = members_[static_cast<std::size_t>(rank)];
    if (!slot.nil()) return refuse(error_code::already_exists, "rank " + std::to_string(rank) + " has joined already");
    slot = std::move(where);
    localities_[static_cast<std::size_t>(rank)] = std::move(locality);
    ++joined_;
    changed_.notify_all();
    const auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    if (!changed_.wait_until(lock, deadline, [&] { return joined_ == members_.size(); })) {
      return refuse(error_code::deadline_exceeded, std::to_string(joined_) + " of " + std::to_string(members_.size()) +
                                                     " members joined in " + std::to_string(timeout_ms) + " ms");
    }
    return {0, "", members_, localities_};
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<peer::endpoint> members_;
  std::vector<std::string> localities_;
  std::optional<int> layout_;
  std::size_t joined_ = 0;
};

rendezvous* make_rendezvous(int world_size) { return new rendezvous(world_size); }

std::string rendezvous_name(const std::string& group) { return "celer.collective." + group; }

} // namespace
} // namespace celer::collective

CELER_REMOTE(celer::collective::make_rendezvous, &celer::collective::rendezvous::join);

namespace celer::collective {

struct group::impl {
  detail::member_state state;
  actor_handle<rendezvous> meeting;
  /// The ring of all members, by rank.
  std::optional<detail::ring> all;
  /// With a hierarchy: the ring of this member's local group, and (in its leader only) the
  /// ring of the local groups' leaders.
  std::optional<detail::ring> local, leaders;

  /// Builds the rings once every member's locality is known. Local groups are ordered by
  /// their lowest rank, which leads them; their members by rank.
  void form_rings(const std::vector<std::string>& localities) {
    const int n = state.o.world_size;
    std::vector<int> everyone(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) everyone[static_cast<std::size_t>(r)] = r;
    all.emplace(state, "all", everyone, state.o.rank);
    if (state.o.hierarchy == grouping::none) return;
    const auto& mine = localities[static_cast<std::size_t>(state.o.rank)];
    std::vector<int> near, heads;
    for (int r = 0; r < n; ++r) {
      const auto& at = localities[static_cast<std::size_t>(r)];
      if (at == mine) near.push_back(r);
      bool first = true;  // the lowest rank of its local group
      for (int q = 0; q < r && first; ++q) first = localities[static_cast<std::size_t>(q)] != at;
      if (first) heads.push_back(r);
    }
    const auto position = [](const std::vector<int>& ranks, int r) {
      return static_cast<int>(std::find(ranks.begin(), ranks.end(), r) - ranks.begin());
    };
    local.emplace(state, "local", near, position(near, state.o.rank));
    if (near.front() == state.o.rank) leaders.emplace(state, "leaders", heads, position(heads, state.o.rank));
  }
};

group::group(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
group::group(group&&) noexcept = default;
group& group::operator=(group&&) noexcept = default;

group::~group() {
  if (!impl_) return;
  if (impl_->state.o.rank == 0) {
    try {
      kill(impl_->meeting);
    } catch (const std::exception&) {  // the runtime is gone already: so is the actor
    }
  }
}

int group::rank() const noexcept { return impl_->state.o.rank; }
int group::size() const noexcept { return impl_->state.o.world_size; }
group_counters group::counters() const noexcept { return impl_->state.counters; }
int group::local_size() const noexcept { return impl_->local ? impl_->local->size() : size(); }

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
  if (o.hierarchy == grouping::by_label && o.local_group.empty()) {
    return error(error_code::invalid_argument, "a group with hierarchy by_label needs each member's local_group");
  }
  auto here = peer::here();
  if (!here) return here.error();
  std::string locality;
  if (o.hierarchy == grouping::by_node) locality = current_node_id().hex();
  if (o.hierarchy == grouping::by_label) locality = o.local_group;
  auto p = std::make_unique<impl>();
  p->state.o = o;
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
    auto joined = celer::get(p->meeting.task(&rendezvous::join).remote(o.world_size, o.rank, *here,
                                                                       static_cast<int>(o.hierarchy), locality, ms));
    if (joined.code != 0) {
      return error(static_cast<error_code>(joined.code),
                   "joining collective group " + o.name + " as rank " + std::to_string(o.rank) + ": " + joined.why);
    }
    p->state.peers = std::move(joined.members);
    p->form_rings(joined.localities);
  } catch (const exception& e) {
    return error(e.code(), "joining collective group " + o.name + " as rank " + std::to_string(o.rank) + ": " + e.what());
  }
  return group(std::move(p));
}

expected<void> group::allreduce_bytes(void* data, std::size_t count, element type, op how) {
  auto& g = *impl_;
  if (auto ok = g.state.begin(); !ok) return ok;
  const int n = g.state.o.world_size;
  if (n == 1) return {};
  if (!g.local) {
    if (auto ok = g.all->allreduce(data, count, type, how); !ok) return ok;
  } else {
    // In the local group, then among the leaders, then from each leader to its group: every
    // member ends with bits the leaders' ring made identical.
    if (auto ok = g.local->allreduce(data, count, type, how); !ok) return ok;
    if (g.leaders)
      if (auto ok = g.leaders->allreduce(data, count, type, how); !ok) return ok;
    if (auto ok = g.local->broadcast(data, count * detail::size_of(type), /*root=*/0); !ok) return ok;
  }
  if (how == op::mean) detail::scale_bytes(data, count, type, n);
  return {};
}

expected<void> group::broadcast_bytes(void* data, std::size_t bytes, int root) {
  auto& g = *impl_;
  if (root < 0 || root >= g.state.o.world_size) {
    return error(error_code::invalid_argument, "broadcast root " + std::to_string(root) + " is outside the group");
  }
  if (auto ok = g.state.begin(); !ok) return ok;
  return g.all->broadcast(data, bytes, root);
}

expected<void> group::allgather_bytes(const void* mine, std::size_t bytes, void* out) {
  auto& g = *impl_;
  if (auto ok = g.state.begin(); !ok) return ok;
  return g.all->allgather(mine, bytes, out);
}

expected<void> group::allreduce_sign(std::span<float> data, sign_feedback& feedback, std::size_t block_size) {
  auto& g = *impl_;
  if (auto ok = g.state.begin(); !ok) return ok;
  return detail::sign_allreduce(g.state, data, feedback.internal(), block_size);
}

void group::abort(const std::string& reason) {
  auto& g = impl_->state;
  if (g.aborting.exchange(true)) return;
  g.aborted_why = reason;
  g.aborted.store(true, std::memory_order_release);
}

expected<void> group::barrier() {
  std::uint8_t token = 0;
  return allreduce(std::span<std::uint8_t>(&token, 1), op::max);
}

} // namespace celer::collective
