#pragma once
// A ring of some of a group's members (all of them, one node's, or the local groups'
// leaders), over celer::peer messages: the collectives of <celer/actors/collective.hpp> run
// on one or more of these. Internal to the collective; runs on the thread of the member that
// calls the group (a group is not shared between threads).

#include <celer/actors/collective.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace celer::collective::detail {

/// What the rings of one member share: its options, the operation under way, whether the
/// group is broken and what it sent. Owned by the group; the rings hold a pointer to it.
struct member_state {
  group_options o;
  /// Every member's endpoint, by rank.
  std::vector<peer::endpoint> peers;
  /// Collectives started: numbers each operation's messages, the same on every member.
  std::uint64_t operations = 0;
  std::string broken;
  group_counters counters;
  /// The mailboxes this member receives on (one per ring): closed when the group breaks.
  std::vector<std::string> inboxes;
  /// Whether the mailboxes of allreduce_sign (one from each other member) are in `inboxes`.
  bool sign_inboxes = false;
  /// Set by group::abort (any thread); `aborted_why` is written once, before `aborted`.
  std::atomic<bool> aborted{false};
  std::atomic<bool> aborting{false};
  std::string aborted_why;

  /// Starts an operation, or says the group is broken (or was aborted).
  expected<void> begin();
  /// Takes message `seq` of `box`, waiting up to the group's timeout or until an abort
  /// (cancelled). The wait is cut in 10 ms slices: the mailbox wakes its taker only for a
  /// message, and abort comes from another thread.
  expected<celer::bytes> receive(const std::string& box, std::uint64_t seq);
  /// Marks the group broken by `e` while `doing`, and returns the error to give the caller.
  error fail(const error& e, const std::string& doing);
};

/// The size in bytes of one element.
std::size_t size_of(group::element e);
/// data[i] /= n, for `count` elements.
void scale_bytes(void* data, std::size_t count, group::element e, int n);
/// [begin, end) of part `i` of `total` split into `n` parts as even as can be.
std::pair<std::size_t, std::size_t> part(std::size_t total, int n, int i);

/// A ring through `ranks` (group ranks, in ring order; this member is `ranks[position]`).
/// Its mailboxes carry `tag`, so that rings of one group do not mix their messages.
class ring {
public:
  ring(member_state& state, std::string tag, std::vector<int> ranks, int position);

  [[nodiscard]] int size() const noexcept { return static_cast<int>(ranks_.size()); }
  [[nodiscard]] int position() const noexcept { return position_; }

  /// Every member of the ring gets the element-wise `how` of their `data` (op::mean adds:
  /// the caller divides). Part p of the data is added in ring order starting after position
  /// p, the same order on every member, and the sums are then copied: the same bits.
  expected<void> allreduce(void* data, std::size_t count, group::element type, op how);
  /// Every member's `data` becomes that of the member at `root` (a position in the ring).
  expected<void> broadcast(void* data, std::size_t bytes, int root);
  /// Every member's `mine`, concatenated in ring order into `out`.
  expected<void> allgather(const void* mine, std::size_t bytes, void* out);

private:
  [[nodiscard]] int right() const { return (position_ + 1) % size(); }
  [[nodiscard]] int left() const { return (position_ + size() - 1) % size(); }
  [[nodiscard]] std::string box(int to, int from) const;
  /// Restarts the message counts when a new operation has begun.
  void catch_up();
  expected<void> send_right(const void* data, std::size_t bytes);
  expected<celer::bytes> take_left(std::size_t expected_bytes);
  [[nodiscard]] std::vector<std::pair<std::size_t, std::size_t>> pieces(std::size_t begin, std::size_t end,
                                                                        std::size_t unit) const;

  member_state* state_;
  std::string tag_;
  std::vector<int> ranks_;
  int position_;
  /// The operation the counts below are for, and messages sent right and taken from the left
  /// in it (several phases of one operation may use this ring: the counts go on).
  std::uint64_t operation_ = 0;
  std::uint64_t sent_ = 0, taken_ = 0;
};

} // namespace celer::collective::detail
