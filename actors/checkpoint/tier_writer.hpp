#pragma once
// What persists a checkpoint into one tier: cuts each entry's bytes into chunks, hashes
// them, stores the chunks the tier lacks, writes the manifest (durable with its chunks), and
// applies the tier's retention, removing the chunks no kept manifest names. The writer actor
// (writer_actor.cpp) runs one per tier; write() runs them in the caller's thread.
//
// One thread at a time (an actor's calls run one after another). A save arrives as
// add_segment calls, in entry and offset order, then one commit.
#include <celer/actors/checkpoint.hpp>
#include <celer/store/checksum.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include "manifest.hpp"
#include "tier.hpp"
#include "wire.hpp"

namespace celer::checkpoint::detail {

class tier_writer {
public:
  /// Opens the tier for writing; a failure is kept and answered to every call.
  explicit tier_writer(writer_config config);

  [[nodiscard]] probe_result probe() const;
  void add_segment(std::uint64_t id, std::uint32_t entry, std::uint64_t offset,
                   std::string_view bytes);
  [[nodiscard]] commit_result commit(const commit_header& header);
  /// Lets go of the tier (its lock with it): a writer opened after this returns succeeds.
  /// Later calls answer failed_precondition.
  void close();

private:
  struct entry_state {
    std::uint64_t size = 0;
    std::unique_ptr<store::running_checksum> sum = std::make_unique<store::running_checksum>();
    std::vector<chunk_ref> chunks;
  };
  struct pending_save {
    std::vector<entry_state> entries;
    std::optional<error> failed;
    std::uint64_t chunks_written = 0;
    std::uint64_t bytes_written = 0;
    std::chrono::nanoseconds busy{0};
  };
  /// Applies retention after checkpoint `newest` was written.
  expected<void> retain(commit_result& out);

  writer_config config_;
  chunking chunking_;
  std::unique_ptr<tier> tier_;
  std::optional<error> open_error_;
  std::map<std::uint64_t, pending_save> pending_;
  /// Manifests of the tier this writer has read or written: id -> step and chunk keys
  /// (nullopt: the manifest does not read back, so what it names is unknown).
  struct known_manifest {
    std::int64_t step = -1;
    std::optional<std::vector<std::string>> chunks;
  };
  std::map<std::uint64_t, known_manifest> known_;
};

/// This node's monotonic clock in ns (steady_clock is CLOCK_MONOTONIC: one clock for every
/// process of the machine).
[[nodiscard]] std::int64_t monotonic_ns() noexcept;

} // namespace celer::checkpoint::detail
