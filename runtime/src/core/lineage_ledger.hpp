#pragma once
// The lineage a core's reference table keeps (reference_table.hpp, "Lineage"): how many
// lineages and how many bytes, within lineage_max_depth and lineage_max_bytes, and the lost
// outputs queued to be made again, handed to the rebuilder (the core's task submitter) once
// the table's lock is released.
//
//   lineage_ledger lineage;
//   lineage.set_rebuilder([&](std::vector<lineage_rebuild> lost) { ... });
//   if (auto why_not = lineage.admit(/*depth=*/1, bytes); why_not.empty()) { ... }  // kept
//   lineage.queue_rebuild(std::move(r), bytes);  // its output was lost: taken off the books
//   auto batch = lineage.take();                 // then, unlocked: batch.to(std::move(batch.work))
//
// Threads: guarded by reference_table::mutex_; what take() hands out runs without it.

#include "protocol/messages.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace celer {

/// A lost output to make again: the task (attempt already counted) and why
/// (reference_table::rebuild).
struct lineage_rebuild {
  protocol::task_spec spec;
  std::int32_t retries_left = 0;
  exceptions_to_retry retry_exceptions;
  std::string why;
};

class lineage_ledger {
public:
  /// Runs lost outputs' tasks again (reference_table::rebuilder).
  using rebuilder = std::function<void(std::vector<lineage_rebuild>)>;

  void set_rebuilder(rebuilder r) { rebuilder_ = std::move(r); }

  /// Whether a lineage `depth` tasks deep, of `bytes`, may be kept now, within
  /// lineage_max_depth and lineage_max_bytes: empty when it may (it is then counted), else
  /// why not.
  [[nodiscard]] std::string admit(std::uint32_t depth, std::size_t bytes);
  /// A kept lineage of `bytes` is dropped (its output was freed or made again).
  void drop(std::size_t bytes) noexcept;
  /// A kept lineage of `bytes` is taken to make its lost output again: off the books, and
  /// `r` queued for the rebuilder (counted in rebuilt()).
  void queue_rebuild(lineage_rebuild r, std::size_t bytes);

  /// The rebuilds queued so far, and the rebuilder to hand them to.
  struct batch {
    std::vector<lineage_rebuild> work;
    rebuilder to;
  };
  /// Takes the queued rebuilds (with the table's lock held); hand them over after releasing
  /// it.
  [[nodiscard]] batch take();

  /// Lineages kept now, their bytes, and lost outputs queued to be made again so far.
  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] std::size_t rebuilt() const noexcept { return rebuilt_; }

private:
  rebuilder rebuilder_;
  /// Rebuilds decided under the table's lock, handed over once it is released.
  std::vector<lineage_rebuild> queued_;
  std::size_t count_ = 0;
  std::size_t bytes_ = 0;
  std::size_t rebuilt_ = 0;
};

} // namespace celer
