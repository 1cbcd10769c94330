#pragma once
// The chunks a pulling node drops (node_store's): a chunk no pull asked for (a late chunk of a
// pull that failed or expired, the wrong object, offset or size, or a sealed one that does
// not authenticate) is counted, and said in the log at most lines_per_second lines a second,
// with one line for the rest: a peer sending junk costs a counter, not a disk.
//
//   dropped_chunk_log dropped;
//   dropped.drop(chunk, "no chunk at offset 0 was asked for", now);
//   dropped.count();   // 1
//
// Threads: the node agent's actor only, as node_store; node_store's one message at a time is
// what guards the members (no lock of their own).

#include "protocol/messages.hpp"

#include <chrono>
#include <cstdint>
#include <string>

namespace celer {

class dropped_chunk_log {
public:
  /// Log lines about dropped chunks per second.
  static constexpr int lines_per_second = 5;

  /// Counts `m` as dropped and logs `why`, with the chunk's object, offset and size (ids and
  /// numbers only: nothing of the peer's text reaches the log), unless this second has had
  /// its lines; `now` is node_store's clock.
  void drop(const protocol::store_chunk& m, const std::string& why, std::chrono::steady_clock::time_point now);
  /// Chunks dropped so far.
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }

private:
  std::uint64_t count_ = 0;
  /// The second being counted, and the lines about dropped chunks in it so far.
  std::chrono::steady_clock::time_point second_;
  int lines_ = 0;
};

} // namespace celer
