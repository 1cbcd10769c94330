#pragma once
/// The output directory of celer-preprocess: CELERRC1 shard files (records.hpp) and the
/// `manifest.json` that says what they hold, written last, so a directory with a manifest is
/// a finished one. The trainers read such a directory (`load_records` in
/// <celer/actors/data.hpp>, `data: records:<dir>` in celer-train); the JSON and the payload
/// layouts are in actors/preprocess/README.md, "The output directory".
///
///   namespace pp = celer::preprocess;
///   pp::manifest m{.schema = "f32:64", .sample_shape = {64}, .classes = 10};
///   pp::key_digest keys;
///   auto w = pp::record_writer::create("out/shard-00000.rec", m.schema);   // check it
///   for (auto& s : samples) {
///     (void)w->append(s.key, s.label, as_bytes(s.floats));   // check each
///     keys.add(s.key);
///   }
///   const auto records = w->count();                   // before finish(), which clears it
///   (void)w->finish();                                 // check it
///   m.shards.push_back({.file = "shard-00000.rec", .records = records, .bytes = w->bytes()});
///   m.items = keys.count;
///   m.key_checksum = keys.hex();
///   m.config_hash = "0123456789abcdef";
///   if (auto ok = pp::write_manifest("out", m); !ok) return fail(ok.error());
///
///   auto back = pp::read_manifest("out");      // expected<manifest>: every field checked
///   if (auto ok = pp::verify_output("out"); !ok) std::cerr << ok.error().message();
///
/// Schemas (the manifest's and every shard's, the same string): "f32:SHAPE" (a sample is
/// product(SHAPE) little-endian float32 values, e.g. "f32:64", "f32:1x28x28"), "u8:SHAPE"
/// (product(SHAPE) bytes, e.g. "u8:1x28x28"), "u32:tokens" (any number of little-endian
/// uint32 token ids) and "text" (UTF-8 bytes).

#include <celer/actors/preprocess/records.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace celer::preprocess {

/// The file name of the manifest inside an output directory.
inline constexpr std::string_view manifest_file_name = "manifest.json";
/// The manifest's own version (its "version" field); the shards' format is "CELERRC1".
inline constexpr int manifest_version = 1;

/// One shard file of an output directory, as the manifest lists it.
struct shard_entry {
  /// The file's name relative to the directory (no "..", not absolute).
  std::string file;
  /// The records it holds, and its size in bytes (record_writer::bytes() after finish()).
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;

  friend bool operator==(const shard_entry&, const shard_entry&) = default;
};

/// What an output directory holds.
struct manifest {
  /// The payload kind: "f32:64", "f32:1x28x28", "u8:1x28x28", "u32:tokens" or "text".
  std::string schema;
  /// For f32 and u8 schemas, the shape parsed from the schema ({1, 28, 28}); else empty.
  std::vector<std::int64_t> sample_shape;
  /// Labels are in [0, classes); 0 when the records are unlabelled (their labels are -1).
  int classes = 0;
  /// Optional: empty, or one name per class.
  std::vector<std::string> label_names;
  /// The records over all shards.
  std::uint64_t items = 0;
  /// key_digest::hex() over every record's key (<celer/actors/preprocess/item.hpp>).
  std::string key_checksum;
  /// 16 hex digits naming the pipeline config that made the directory.
  std::string config_hash;
  /// In the order a reader should read them; records in file order within each.
  std::vector<shard_entry> shards;

  friend bool operator==(const manifest&, const manifest&) = default;
};

/// Writes `dir`/manifest.json (making `dir` if needed) through `manifest.json.part`, an
/// fsync, a rename and an fsync of the directory: a reader sees the old manifest, the new
/// one or none, never half of one. invalid_argument naming the field for a manifest
/// read_manifest would refuse (sample_shape may be left empty: it is filled from the
/// schema); I/O errors as the disk reports them.
[[nodiscard]] expected<void> write_manifest(const std::string& dir, const manifest& m);

/// Reads and checks `dir`/manifest.json: not_found for a missing directory or manifest;
/// data_loss for text that is not JSON; failed_precondition for a version other than 1;
/// invalid_argument naming the field ("shards[2].records") for anything else wrong: a field
/// missing or of the wrong type, a bad schema, items that are not the shards' sum, a
/// checksum that is not 16 hex digits, a shard file outside the directory or listed twice.
/// Fields it does not know are ignored. Reads no shard.
[[nodiscard]] expected<manifest> read_manifest(const std::string& dir);

/// The shape in an "f32:SHAPE" or "u8:SHAPE" schema: "f32:1x28x28" -> {1, 28, 28}; an empty
/// vector for "u32:tokens" and "text". invalid_argument for any other schema, a dimension
/// that is not a positive integer, more than 8 dimensions, or a sample over 2^30 values.
[[nodiscard]] expected<std::vector<std::int64_t>> parse_schema_shape(std::string_view schema);

/// A sample's payload size in bytes for a fixed-size schema ("f32:8x8": 256), 0 for
/// "u32:tokens" and "text" (any size; tokens a multiple of 4). Errors as parse_schema_shape.
[[nodiscard]] expected<std::uint64_t> schema_payload_bytes(std::string_view schema);

/// Opens shard `i` of `m` (read from `dir`) and checks its frame against the manifest:
/// not_found when the file is missing; data_loss, naming the file, when its schema, record
/// count or size is not the manifest's, or its frame is damaged (record_reader::open).
[[nodiscard]] expected<record_reader> open_shard(const std::string& dir, const manifest& m,
                                                 std::size_t i);

/// Reads the manifest, opens every shard (open_shard), verify()s it (every record's CRC and
/// the file's), checks each payload's size against the schema and each label against
/// [0, classes) (labelled outputs), recomputes the key digest over all records and compares
/// it and the count with the manifest's. The first problem, naming the shard file and the
/// record: the codes of read_manifest and open_shard, data_loss for damage or a key
/// checksum that differs, invalid_argument for a payload or label the manifest forbids.
[[nodiscard]] expected<void> verify_output(const std::string& dir);

} // namespace celer::preprocess
