#pragma once
/// A training run's metrics on disk, in the two forms people open: TensorBoard event files
/// (`tensorboard --logdir <dir>` plots them) and JSON Lines (one object per step, for
/// pandas, jq or the app's HTML report).
///
///   namespace tr = celer::trainer;
///   auto tb = tr::event_file_writer::open({.dir = out_dir + "/tensorboard"});
///   auto jl = tr::jsonl_writer::open({.path = out_dir + "/metrics.jsonl"});
///   if (!tb || !jl) { ...report the error... }
///   const tr::scalar figures[] = {{"loss", loss}, {"samples_per_s", rate},
///                                 {"bytes_sent", double(bytes)}};
///   if (auto ok = tb->add_scalars(step, figures); !ok) { ... }
///   if (auto ok = jl->write(step, figures); !ok) { ... }
///   // metrics.jsonl: {"step":12,"wall_time":1717171717.25,"loss":0.31,...,"bytes_sent":131104}
///   // at the end (the destructors close too, dropping any error):
///   (void)tb->close();
///   (void)jl->close();
///
/// The event file is written directly, without TensorFlow or protobuf: TFRecord framing
/// (each record: its length as a little-endian uint64, the masked CRC-32C of those 8
/// bytes, the data, the masked CRC-32C of the data) around hand-encoded `tensorflow.Event`
/// messages. The first record carries file_version "brain.Event:2"; each later one a
/// wall time, a step and a Summary of `simple_value` scalars. bench/peers/
/// tensorboard_read_events.py checks by hand that TensorBoard's own reader reads it.
///
/// Writers buffer records in memory and write them out every `flush.every_records`
/// records, when a record comes `flush.every` after the last write, on flush() and on
/// close(). There is no background thread: a writer that receives nothing writes nothing
/// until its next record or close. Nothing is fsync'ed (metrics, not checkpoints: a crash
/// loses at most the records not yet flushed). Each writer belongs to one thread.

#include <celer/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace celer::trainer {

/// The CRC-32C (Castagnoli) of `size` bytes at `data`, continuing from `crc` (the CRC of
/// the bytes before them; 0 to start): iSCSI's and TFRecord's checksum.
/// crc32c("123456789") is 0xE3069283.
[[nodiscard]] std::uint32_t crc32c(const void* data, std::size_t size,
                                   std::uint32_t crc = 0) noexcept;
[[nodiscard]] inline std::uint32_t crc32c(std::string_view data) noexcept {
  return crc32c(data.data(), data.size());
}
/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8 (modulo 2^32), so that
/// a CRC over bytes that hold CRCs does not degenerate.
[[nodiscard]] constexpr std::uint32_t mask_crc(std::uint32_t crc) noexcept {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/// One named figure of a step ("loss", "samples_per_s", "grad_norm"). A tag is valid
/// UTF-8 and not empty.
struct scalar {
  std::string tag;
  double value = 0;
};

/// A text column of a JSONL line (a training run's mode: "sync", "async"), written as a
/// JSON string. Event files have no place for it.
struct text_field {
  std::string tag;
  std::string value;
};

/// When a writer hands its buffered records to the file.
struct flush_policy {
  /// After this many records (at least 1).
  std::size_t every_records = 50;
  /// When a record comes at least this long after the last write. TensorBoard reloads
  /// every 5 s (its --reload_interval), so a shorter wait shows nothing sooner.
  std::chrono::milliseconds every{std::chrono::seconds(5)};
};

/// Where wall times come from; tests pass a fake. Empty: std::chrono::system_clock::now.
using wall_clock = std::function<std::chrono::system_clock::time_point()>;

/// Where an event file goes and how it is written.
struct event_file_options {
  /// The directory (made if missing) TensorBoard is pointed at, or one of its subfolders.
  std::string dir;
  flush_policy flush;
  wall_clock clock;
  /// The host part of the file name; empty: this machine's name (gethostname). A '/' in
  /// it becomes '_'.
  std::string hostname;
};

/// Appends scalar summaries to a new TensorBoard event file,
/// `<dir>/events.out.tfevents.<seconds since the epoch>.<hostname>` (with ".1", ".2", ...
/// added should another writer have made that name in the same second). Move-only; the
/// destructor closes it, dropping any error (call close() to see it).
class event_file_writer {
public:
  /// Makes `dir` if needed, creates the file (never overwriting one) and writes the
  /// file_version record. invalid_argument for an empty dir or a bad flush policy; an I/O
  /// failure as the disk says it (permission_denied, resource_exhausted for a full disk,
  /// otherwise unavailable), naming the path.
  [[nodiscard]] static expected<event_file_writer> open(event_file_options opts);

  event_file_writer(event_file_writer&&) noexcept;
  event_file_writer& operator=(event_file_writer&&) noexcept;
  ~event_file_writer();

  /// One Event with one scalar: `value` (stored as a float, as TensorBoard's
  /// simple_value is) under `tag` at `step`, stamped with the clock's time.
  /// invalid_argument for an empty tag or one that is not UTF-8; an I/O error if this
  /// record's flush fails. After an I/O error every call answers failed_precondition.
  [[nodiscard]] expected<void> add_scalar(std::string_view tag, std::int64_t step, double value);
  /// One Event holding every scalar of `values` (at least one) at `step`: how a trainer
  /// logs one step's figures.
  [[nodiscard]] expected<void> add_scalars(std::int64_t step, std::span<const scalar> values);
  /// Writes what is buffered.
  [[nodiscard]] expected<void> flush();
  /// Writes what is buffered and closes the file; later calls answer failed_precondition.
  /// Closing twice is fine.
  [[nodiscard]] expected<void> close();

  /// The file's full path.
  [[nodiscard]] const std::string& path() const noexcept;
  /// Records written so far, the file_version record included (buffered ones too).
  [[nodiscard]] std::uint64_t records() const noexcept;

private:
  struct impl;
  explicit event_file_writer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// One Event of an event file, as read back.
struct event_record {
  double wall_time = 0;
  std::int64_t step = 0;
  /// "brain.Event:2" in the first record, empty in the others.
  std::string file_version;
  /// The summary's scalars, in order (simple_value read back as a float, widened).
  std::vector<scalar> values;
};

/// An event file's records.
struct event_file_contents {
  std::vector<event_record> events;
  /// The file ends inside a record (a writer was still writing it, or died): the records
  /// before it are returned, as TensorBoard does.
  bool truncated = false;
};

/// Reads an event file written by event_file_writer (or by TensorFlow, for scalar
/// summaries): checks both CRCs of every record and decodes the Event fields above,
/// skipping those it does not know. not_found for a missing file; data_loss, naming the
/// record and its byte offset, for a CRC that does not match or an Event that does not
/// parse.
[[nodiscard]] expected<event_file_contents> read_event_file(const std::string& path);

/// Where a JSONL file goes and how it is written.
struct jsonl_options {
  /// The file; its directory is made if missing.
  std::string path;
  /// Append to what the file holds (a resumed run goes on in the same file); false:
  /// start it empty.
  bool append = true;
  flush_policy flush;
  wall_clock clock;
};

/// Writes one JSON object per line, one line per step: {"step": s, "wall_time": seconds
/// since the epoch, then each scalar's tag and value in the order given}. A value that is
/// a whole number below 2^53 is written as an integer (bytes, samples), a non-finite one
/// as null (JSON has no NaN). Move-only; the destructor closes, dropping any error.
class jsonl_writer {
public:
  /// Opens (creating) the file. invalid_argument for an empty path or a bad flush
  /// policy; an I/O failure as event_file_writer::open.
  [[nodiscard]] static expected<jsonl_writer> open(jsonl_options opts);

  jsonl_writer(jsonl_writer&&) noexcept;
  jsonl_writer& operator=(jsonl_writer&&) noexcept;
  ~jsonl_writer();

  /// One line for `step`. invalid_argument for a tag that is empty, not UTF-8, repeated,
  /// or "step" or "wall_time"; an I/O error if this line's flush fails (after which every
  /// call answers failed_precondition).
  [[nodiscard]] expected<void> write(std::int64_t step, std::span<const scalar> values);
  /// The same with text columns first (after "step" and "wall_time"); a value must be
  /// valid UTF-8, and a tag may not repeat across both lists.
  [[nodiscard]] expected<void> write(std::int64_t step, std::span<const text_field> texts,
                                     std::span<const scalar> values);
  [[nodiscard]] expected<void> flush();
  [[nodiscard]] expected<void> close();
  [[nodiscard]] const std::string& path() const noexcept;

private:
  struct impl;
  explicit jsonl_writer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace celer::trainer
