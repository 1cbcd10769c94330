#pragma once
/// Checkpoints: save a named set of byte blobs and small values (model weights, optimiser
/// state, scheduler state, RNG states, the step, the position in the data) from any driver
/// or actor, and restore them exactly.
///
///   celer::checkpoint::snapshot s;
///   s.set_step(step);
///   s.add_view("model/fc1.weight", w.data(), w.size() * sizeof(float), {{"dtype", "float32"}});
///   s.add_int("data/position", position);
///   s.add_rng("rng/sampler", sampler);                       // any std engine, as text
///   auto ck = celer::checkpoint::checkpointer::open({.fast_dir = "/local/ckpt",
///                                                   .archive_dir = "/mnt/shared/run7"});
///   if (!ck) return fail(ck.error());
///   (void)ck->save(s);              // copies s into the object store and returns
///   ...                             // training goes on; writer actors persist in the background
///   if (auto done = ck->wait(); !done) std::cerr << done.error().to_string() << "\n";
///
///   auto back = celer::checkpoint::restore({.fast_dir = "/local/ckpt",
///                                           .archive_dir = "/mnt/shared/run7"});
///   // back->data: the snapshot; back->skipped: newer checkpoints passed over, and why
///
/// Asynchronous: `save` copies the snapshot into the node's object store (one memcpy) and
/// returns; one writer actor per tier, on this node, cuts the bytes into content-defined
/// chunks, hashes them, and writes the chunks its tier lacks. At most `max_pending` saves are
/// in flight; `save` waits for the oldest when that many are. Incremental: a chunk a tier
/// already holds is not written again. Tiered: a fast tier (a RocksDB on this node) keeps the
/// last few; an archive tier (a directory, local or mounted) keeps what its retention says.
/// Restore takes the newest checkpoint whose every chunk and entry checks out, reading each
/// chunk from whichever tier has a good copy, and says which newer ones it skipped and why.
/// actors/README.md documents the on-disk format (readable by hand) and the limits.

#include <celer/codec.hpp>
#include <celer/error.hpp>
#include <celer/ids.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace celer::checkpoint {

/// What an entry holds: raw bytes, or a small value kept as text (exact: integers in
/// decimal, doubles as C99 hex floats, RNG engines as the standard's `operator<<` text).
enum class value_type : std::uint8_t { bytes = 0, int64 = 1, float64 = 2, text = 3 };

/// One named value of a snapshot.
struct entry {
  std::string name;
  value_type type = value_type::bytes;
  /// Small facts about the bytes that a reader needs, e.g. {"dtype", "float32"},
  /// {"shape", "256,784"} for a tensor. Stored in the manifest as they are.
  std::map<std::string, std::string> attributes;
  /// The bytes (for the small types, their text).
  celer::bytes data;
  MSGPACK_DEFINE(name, type, attributes, data)
};

/// An ordered set of named entries, with a step and free-form metadata: what one checkpoint
/// holds. Adding a name again replaces its entry in place.
class snapshot {
public:
  void set_step(std::int64_t step) noexcept { step_ = step; }
  [[nodiscard]] std::int64_t step() const noexcept { return step_; }
  void set_metadata(std::string key, std::string value) {
    metadata_.insert_or_assign(std::move(key), std::move(value));
  }
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const noexcept {
    return metadata_;
  }

  /// Adds `e` as it is (restore builds snapshots this way).
  snapshot& add(entry e);
  /// Takes `data` (no copy); `save` copies it into the object store.
  snapshot& add_bytes(std::string name, celer::bytes data,
                      std::map<std::string, std::string> attributes = {});
  /// Refers to `size` bytes at `data` without copying: they must stay unchanged until
  /// `save` (or `write`) returns, which copies them.
  snapshot& add_view(std::string name, const void* data, std::size_t size,
                     std::map<std::string, std::string> attributes = {});
  snapshot& add_int(std::string name, std::int64_t value);
  snapshot& add_float(std::string name, double value);
  snapshot& add_text(std::string name, std::string value);
  /// An RNG engine's state, as its `operator<<` writes it (std::mt19937_64 and friends).
  template <class Engine>
  snapshot& add_rng(std::string name, const Engine& engine) {
    std::ostringstream out;
    out << engine;
    return add_text(std::move(name), out.str());
  }

  [[nodiscard]] const std::vector<entry>& entries() const noexcept { return entries_; }
  /// The entry named `name`, or nullptr.
  [[nodiscard]] const entry* find(std::string_view name) const noexcept;
  /// The value of an entry added with add_int / add_float / add_text (or add_rng).
  /// not_found without it; invalid_argument when it holds another type.
  [[nodiscard]] expected<std::int64_t> get_int(std::string_view name) const;
  [[nodiscard]] expected<double> get_float(std::string_view name) const;
  [[nodiscard]] expected<std::string> get_text(std::string_view name) const;
  /// Sets `engine` to the state saved by add_rng. data_loss when the text does not parse.
  template <class Engine>
  [[nodiscard]] expected<void> get_rng(std::string_view name, Engine& engine) const {
    auto text = get_text(name);
    if (!text) return text.error();
    std::istringstream in(*text);
    Engine e;
    in >> e;
    if (in.fail()) {
      return error(error_code::data_loss,
                   "entry " + std::string(name) + " does not hold this RNG engine's state");
    }
    engine = e;
    return {};
  }
  /// The bytes of every entry together.
  [[nodiscard]] std::uint64_t logical_bytes() const noexcept;

  /// A snapshot is a celer value: an actor can return one (a trial's state) for its caller
  /// to save. Its bytes entries travel as msgpack `bin`s.
  MSGPACK_DEFINE(step_, metadata_, entries_)

private:
  std::int64_t step_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<entry> entries_;
};

/// How bytes are cut into chunks: FastCDC (a gear rolling hash with normalised chunking)
/// between `min_bytes` and `max_bytes`, cuts averaging about `avg_bytes` (a power of two).
/// The cuts depend on the 64 bytes before each, so an edit moves only the cuts next to it.
struct chunking {
  std::size_t min_bytes = std::size_t{64} << 10;
  std::size_t avg_bytes = std::size_t{256} << 10;
  std::size_t max_bytes = std::size_t{1} << 20;
};

/// The lengths of the chunks `size` bytes at `data` are cut into, in order (they sum to
/// `size`; empty for no bytes). The same bytes and parameters give the same cuts, always.
[[nodiscard]] std::vector<std::size_t> cut(const void* data, std::size_t size,
                                           const chunking& parameters = {});

/// Where checkpoints live and how long they stay. At least one tier must be named.
struct options {
  /// The fast tier: a RocksDB in this directory, on this node's disk. Empty: none.
  std::string fast_dir;
  /// The archive tier: a directory, local or mounted (NFS, a bucket's FUSE mount). Empty:
  /// none.
  std::string archive_dir;
  /// The fast tier keeps the newest this many checkpoints.
  std::size_t fast_keep_last = 3;
  /// The archive keeps the newest this many checkpoints...
  std::size_t archive_keep_last = 5;
  /// ...and, when above 0, every checkpoint whose step is a multiple of this, forever.
  std::int64_t archive_keep_every_steps = 0;
  /// Saves in flight (copied, not yet persisted by every tier) before `save` waits.
  std::size_t max_pending = 2;
  chunking chunks;
  /// An entry travels to the writers in pieces of at most this many bytes (one object
  /// each); chunks never straddle two pieces.
  std::size_t segment_bytes = std::size_t{64} << 20;
};

/// A checkpoint as a tier lists it.
struct checkpoint_info {
  /// Grows by one with each save to the same directories: the newest has the largest.
  std::uint64_t id = 0;
  std::int64_t step = 0;
  std::chrono::system_clock::time_point created;
  std::uint64_t logical_bytes = 0;
  std::map<std::string, std::string> metadata;
  bool in_fast = false;
  bool in_archive = false;
};

/// What one tier's writer did for one save.
struct tier_report {
  bool used = false;
  /// Chunks the checkpoint refers to, and those of them this save wrote (the rest the
  /// tier held already).
  std::uint64_t chunks = 0;
  std::uint64_t chunks_written = 0;
  /// Bytes this save wrote: new chunks and the manifest.
  std::uint64_t bytes_written = 0;
  std::uint64_t manifest_bytes = 0;
  /// What retention removed after this save.
  std::uint64_t checkpoints_removed = 0;
  std::uint64_t chunks_removed = 0;
  /// The writer's own time on this save (cutting, hashing, writing, syncing, retention).
  std::chrono::nanoseconds busy{0};
  /// From `save` being called to this tier's copy being durable (both clocks are this
  /// node's monotonic clock).
  std::chrono::nanoseconds durable_after{0};
  /// The node the writer ran on.
  node_id node;
};

/// What one save did, once every tier finished it.
struct save_report {
  std::uint64_t id = 0;
  std::int64_t step = 0;
  /// The snapshot's bytes.
  std::uint64_t logical_bytes = 0;
  tier_report fast;
  tier_report archive;
  /// How long `save` held its caller (waiting for a free slot included).
  std::chrono::nanoseconds blocked{0};
  /// Of `blocked`, the time spent waiting for an older save (back-pressure).
  std::chrono::nanoseconds queued{0};
};

/// Saves asynchronously through writer actors on this node. Needs celer::init (embedded or
/// a cluster). Move-only; destroying it waits for pending saves, then stops its writers.
/// One thread at a time (the trainer's): it is not guarded by a lock.
/// One checkpointer (or `write`) per pair of directories at a time: the fast tier's RocksDB
/// and the archive's LOCK file refuse a second writer.
class checkpointer {
public:
  /// Checks the options, starts one writer actor per tier on this node, and waits until
  /// each has opened its tier and read its newest id. invalid_argument for bad options;
  /// failed_precondition without celer::init; a tier that cannot be opened as the disk
  /// says (permission_denied, resource_exhausted, unavailable when another writer holds
  /// it), naming the path.
  [[nodiscard]] static expected<checkpointer> open(options opts);

  checkpointer(checkpointer&&) noexcept;
  checkpointer& operator=(checkpointer&&) noexcept;
  ~checkpointer();

  /// Copies `s` into the object store, hands it to the writers, and returns its id. Waits
  /// first when `max_pending` saves are in flight. invalid_argument for an entry without a
  /// name; resource_exhausted when the object store cannot hold the copy. A failure of
  /// the writers shows in `wait`, not here.
  [[nodiscard]] expected<std::uint64_t> save(const snapshot& s);
  /// Waits until every save so far is durable in every tier. The first failure since the
  /// last `wait` (a full disk is resource_exhausted, naming the path; the message counts
  /// the others), or success.
  [[nodiscard]] expected<void> wait();
  /// Reports of the saves that finished since the last call, oldest first (failed ones
  /// have none).
  [[nodiscard]] std::vector<save_report> take_reports();
  /// Saves handed to the writers and not yet collected as finished.
  [[nodiscard]] std::size_t pending() const noexcept;

private:
  struct impl;
  explicit checkpointer(std::unique_ptr<impl> p);
  expected<std::uint64_t> save_now(const snapshot& s);
  std::unique_ptr<impl> impl_;
};

/// Saves `s` now, in this thread, through the same code the writers run: no runtime needed
/// (tools, a last checkpoint at exit, tests). Its id is the tiers' newest plus one.
[[nodiscard]] expected<save_report> write(const snapshot& s, const options& opts);

/// A newer checkpoint that restore passed over.
struct skipped_checkpoint {
  std::uint64_t id = 0;
  /// -1 when no copy of its manifest reads back.
  std::int64_t step = 0;
  /// What was wrong, per tier ("archive: chunk 3f2a… of entry model/w: hash mismatch").
  std::string why;
};

/// What restore read.
struct restored {
  snapshot data;
  checkpoint_info info;
  /// Where its bytes came from: "fast", "archive" or "fast+archive".
  std::string source;
  /// Newer checkpoints that could not be read, newest first, with why.
  std::vector<skipped_checkpoint> skipped;
  /// Bad copies read from the other tier instead (the checkpoint itself is whole).
  std::vector<std::string> repaired;
  std::chrono::nanoseconds elapsed{0};
};

/// Which checkpoint restore looks for.
struct restore_options {
  /// The newest with an id at most this; nullopt: the newest of all.
  std::optional<std::uint64_t> max_id;
};

/// Restores the newest checkpoint that reads back whole: every chunk matches its hash and
/// every entry its checksum. Each chunk and manifest is read from the fast tier first and
/// from the archive when the fast copy is missing or bad. not_found when the tiers hold no
/// checkpoint; data_loss, listing why for each, when none reads back whole. Reads only:
/// opens beside a running checkpointer.
[[nodiscard]] expected<restored> restore(const options& opts, const restore_options& which = {});

/// The checkpoints the tiers hold, oldest first (manifests that do not parse are left out).
[[nodiscard]] expected<std::vector<checkpoint_info>> list(const options& opts);

} // namespace celer::checkpoint

MSGPACK_ADD_ENUM(celer::checkpoint::value_type);
