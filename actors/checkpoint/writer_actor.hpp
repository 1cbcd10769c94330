#pragma once
// The writer actor: a tier_writer behind CELER_REMOTE, one per tier, started by a
// checkpointer on its own node (the fast tier is that node's disk, and the snapshot's
// pieces are objects in that node's store, mapped by the writer without a copy).
#include <celer/codec.hpp>

#include "tier_writer.hpp"
#include "wire.hpp"

namespace celer::checkpoint::detail {

class writer_actor {
public:
  explicit writer_actor(writer_config config) : writer_(std::move(config)) {}
  probe_result probe() { return writer_.probe(); }
  /// `bytes` is a view of the piece's object in the node's store (large pieces) or a copy
  /// (small ones, which travel inline).
  void add_segment(std::uint64_t id, std::uint32_t entry, std::uint64_t offset,
                   celer::bytes bytes) {
    writer_.add_segment(id, entry, offset, bytes.view());
  }
  commit_result commit(commit_header header) { return writer_.commit(header); }
  /// Closes the tier now: killing an actor ends it later, and the tier's lock must be free
  /// when the checkpointer that stops it returns.
  bool close() {
    writer_.close();
    return true;
  }

private:
  tier_writer writer_;
};

writer_actor* make_writer_actor(writer_config config);

} // namespace celer::checkpoint::detail
