#pragma once
/// Shard files of preprocessed records: what celer-preprocess writes and the trainers' loaders
/// read directly, one documented, checksummed binary format ("CELERRC1", byte layout in
/// actors/preprocess/README.md).
///
///   namespace pp = celer::preprocess;
///   auto w = pp::record_writer::create("out/shard-00003.rec", "image:u8:28x28+label");
///   if (!w) return fail(w.error());
///   for (auto& img : images)
///     if (auto ok = w->append(img.key, img.label, img.pixels); !ok) return fail(ok.error());
///   if (auto ok = w->finish(); !ok) return fail(ok.error());   // now the file exists
///
///   auto r = pp::record_reader::open("out/shard-00003.rec");
///   if (!r) return fail(r.error());
///   std::cout << r->schema() << ": " << r->count() << " records\n";
///   while (true) {
///     auto rec = r->next();                 // expected<std::optional<record_view>>
///     if (!rec) return fail(rec.error());   // data_loss naming the file and byte offset
///     if (!*rec) break;                     // past the last record
///     use((*rec)->key, (*rec)->label, (*rec)->payload);   // views into the mapped file
///   }
///
/// A record is a key (bytes, usually the item's id or path), a label (int32: a class, a
/// category or language id; the schema says what it means) and a payload (bytes). Each
/// record carries a CRC-32 of its bytes, the file ends with an index of record offsets, and
/// a trailer holds the record count and a CRC-32 of the whole file, so damage and truncation
/// are found, never read as data. Payloads start at offsets that are multiples of 8, so a
/// loader may read float32 or int64 payloads in place. The same records appended in the same
/// order give the same bytes: no time, host or path is stored.
///
/// Writers write to `path + ".part"` and rename it to `path` only in `finish()`, after an
/// fsync: a crash leaves at worst a `.part` file, never a half file under the final name.
/// A writer or reader belongs to one thread at a time; readers of one file may be many.

#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace celer::preprocess {

/// The first 8 bytes of every record file.
inline constexpr std::string_view record_file_magic = "CELERRC1";
/// The last 8 bytes of every finished record file.
inline constexpr std::string_view record_file_end_magic = "CELEREND";
/// The layout version this code writes and reads.
inline constexpr std::uint32_t record_file_version = 1;

/// One record as read: views into the reader's mapping, valid while the reader lives.
struct record_view {
  std::string_view key;
  std::int32_t label = 0;
  /// The payload's first byte is at a file offset that is a multiple of 8.
  std::string_view payload;
  /// The byte offset of the record's frame in the file (where its CRC is).
  std::uint64_t offset = 0;
  /// The record's number in the file, from 0.
  std::uint64_t index = 0;
};

/// Appends records to a new record file. Move-only; one thread.
class record_writer {
public:
  /// Opens `path + ".part"` (replacing a stale one left by a crash) and writes the header.
  /// `schema` names the payload kind ("image:u8:28x28+label", "text", "tokens:u32") and is
  /// stored as it is; at most 64 KiB. invalid_argument for an empty path or a long schema;
  /// I/O errors as the disk reports them (permission_denied, resource_exhausted, unavailable).
  [[nodiscard]] static expected<record_writer> create(std::string path, std::string schema);

  /// A writer that keeps the file in memory: finish_in_memory() returns its bytes, the same
  /// bytes a file writer given the same records would write. For blocks that travel as
  /// store objects instead of files.
  [[nodiscard]] static expected<record_writer> in_memory(std::string schema);
  record_writer(record_writer&& other) noexcept;
  record_writer& operator=(record_writer&& other) noexcept;
  record_writer(const record_writer&) = delete;
  record_writer& operator=(const record_writer&) = delete;
  /// A writer dropped before finish() removes its `.part` file: no file is made.
  ~record_writer();

  /// Appends one record. Keys may be up to 4 GiB − 1 bytes and may repeat (the format does
  /// not index by key). After an I/O error every later call returns failed_precondition.
  [[nodiscard]] expected<void> append(std::string_view key, std::int32_t label,
                                      std::string_view payload);
  /// Writes the index and trailer, fsyncs the file, renames it to `path` and fsyncs the
  /// folder. Afterwards append and finish return failed_precondition.
  [[nodiscard]] expected<void> finish();
  /// finish() for an in_memory() writer: the whole file's bytes (failed_precondition for a
  /// file writer).
  [[nodiscard]] expected<std::string> finish_in_memory();

  /// The records appended so far.
  [[nodiscard]] std::uint64_t count() const noexcept { return offsets_.size(); }
  /// The bytes written (or buffered) so far, header included.
  [[nodiscard]] std::uint64_t bytes() const noexcept { return size_; }
  /// The final path (the file is `path() + ".part"` until finish()).
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

private:
  record_writer() = default;
  expected<void> write_out(std::string_view bytes);
  expected<void> flush();
  expected<void> fail(error err);
  void close_and_remove() noexcept;

  std::string path_, part_;
  int fd_ = -1;
  bool finished_ = false;
  std::optional<error> broken_;
  /// Bytes not yet written; written out when past a threshold (records are small, usually).
  std::string buffer_;
  std::uint64_t size_ = 0;
  /// zlib's running CRC-32 of every byte so far: the trailer's whole-file checksum.
  std::uint32_t file_crc_ = 0;
  /// Each record's offset: the index. 8 bytes of memory per record until finish().
  std::vector<std::uint64_t> offsets_;
  bool in_memory_ = false;
};

/// Reads a finished record file through a read-only mmap: payloads are never copied.
/// Move-only; the views it hands out live as long as it does.
class record_reader {
public:
  /// Maps `path` and checks its frame: magic (invalid_argument: not a record file), version
  /// (failed_precondition: written by another version), the header's CRC, the trailer, the
  /// index and its CRC (data_loss, naming the byte offset: damaged or truncated). Records
  /// are checked when read; `verify()` checks everything, the whole-file CRC included.
  [[nodiscard]] static expected<record_reader> open(std::string path);

  /// Reads a record file's bytes held elsewhere (an in-memory writer's, a store object's):
  /// the same checks as open(); `bytes` must outlive the reader and its views; `name` is
  /// what errors call it.
  [[nodiscard]] static expected<record_reader> view(std::string_view bytes, std::string name);
  record_reader(record_reader&& other) noexcept;
  record_reader& operator=(record_reader&& other) noexcept;
  record_reader(const record_reader&) = delete;
  record_reader& operator=(const record_reader&) = delete;
  ~record_reader();

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// The schema string the writer was given.
  [[nodiscard]] std::string_view schema() const noexcept { return schema_; }
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  /// The file's size in bytes.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }

  /// Record `i` (0 <= i < count()), found through the index; its CRC is checked.
  /// invalid_argument past the end; data_loss naming the record and byte offset if damaged.
  [[nodiscard]] expected<record_view> at(std::uint64_t i) const;
  /// The next record in file order, std::nullopt after the last. A damaged record is an
  /// error and the position stays at it.
  [[nodiscard]] expected<std::optional<record_view>> next();
  /// Goes back to the first record (or to record `i`).
  void seek(std::uint64_t i = 0) noexcept { position_ = i; }
  [[nodiscard]] std::uint64_t position() const noexcept { return position_; }

  /// Checks the whole-file CRC and then every record's: the first problem, or nothing.
  [[nodiscard]] expected<void> verify() const;

private:
  record_reader() = default;
  [[nodiscard]] static expected<record_reader> check_frame(record_reader r);
  [[nodiscard]] error damaged(std::uint64_t offset, const std::string& what) const;
  [[nodiscard]] std::uint64_t index_entry(std::uint64_t i) const noexcept;

  std::string path_;
  const char* data_ = nullptr;  // the mapping, size_ bytes; nullptr when moved from
  bool owned_ = true;           // data_ is our mapping (open), not the caller's (view)
  std::uint64_t size_ = 0;
  std::string_view schema_;
  std::uint64_t first_record_ = 0;  // where record 0 starts (the header's end)
  std::uint64_t index_offset_ = 0;  // where the index starts (the records' end)
  std::uint64_t count_ = 0;
  std::uint64_t position_ = 0;
};

/// Writes `reader`'s records as CSV for people: a header row, then one row per record,
/// `key,label,payload_bytes`, and a fourth column `payload` (the payload as text) when the
/// schema is "text" or starts with "text:". Fields with a comma, a quote or a line break are
/// quoted, quotes doubled (RFC 4180). data_loss for a damaged record; unavailable when the
/// stream fails.
[[nodiscard]] expected<void> write_csv(const record_reader& reader, std::ostream& out);
/// The same into a file at `path` (replaced if it exists).
[[nodiscard]] expected<void> write_csv(const record_reader& reader, const std::string& path);

/// Writes `reader`'s records as JSON Lines, one object per record, through nlohmann-json:
/// `{"key":"...","label":3,"payload_bytes":784}`, plus `"payload":"..."` for a text schema
/// as in write_csv. Bytes that are not UTF-8 become U+FFFD.
[[nodiscard]] expected<void> write_jsonl(const record_reader& reader, std::ostream& out);
[[nodiscard]] expected<void> write_jsonl(const record_reader& reader, const std::string& path);

} // namespace celer::preprocess
