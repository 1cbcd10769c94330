// A celer-preprocess output directory as a dataset (load_records in data.hpp): the manifest
// (<celer/actors/preprocess/manifest.hpp>), then every shard through record_reader's mmap.
#include <celer/actors/data.hpp>
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/manifest.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace celer::actors {
namespace {

namespace fs = std::filesystem;
namespace pp = celer::preprocess;

/// The name a directory goes by: its last component ("out/digits/" -> "digits").
std::string directory_name(const std::string& dir) {
  const fs::path p = fs::path(dir).lexically_normal();
  const std::string last = p.has_filename() ? p.filename().string() : p.parent_path().filename().string();
  return last.empty() || last == "." ? "records" : last;
}

/// Appends `n` little-endian float32 values from `bytes` to `out`.
void append_f32(std::string_view bytes, std::size_t n, std::vector<float>& out) {
  const std::size_t at = out.size();
  out.resize(at + n);
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out.data() + at, bytes.data(), n * sizeof(float));
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t v = 0;
      for (int b = 0; b < 4; ++b) v |= std::uint32_t{static_cast<unsigned char>(bytes[4 * i + b])} << (8 * b);
      out[at + i] = std::bit_cast<float>(v);
    }
  }
}

} // namespace

expected<dataset> load_records(const std::string& dir, std::size_t limit) {
  auto m = pp::read_manifest(dir);
  if (!m) return m.error();
  const bool f32 = m->schema.starts_with("f32:");
  if (!f32 && !m->schema.starts_with("u8:"))
    return error(error_code::invalid_argument,
                 dir + " holds records of schema \"" + m->schema +
                   "\": the trainers read samples of a fixed shape, f32:SHAPE or u8:SHAPE (make the pipeline "
                   "write float32 values or bytes of one shape); token and text records are not loaded as a "
                   "dataset");
  if (m->classes < 1)
    return error(error_code::invalid_argument,
                 dir + " holds unlabelled records (classes 0 in its manifest.json): the trainers classify, so "
                       "they need labels (give the pipeline a label column or category)");
  const auto payload = pp::schema_payload_bytes(m->schema);
  if (!payload) return payload.error();  // read_manifest checked the schema
  dataset d;
  d.name = directory_name(dir);
  d.sample_shape = m->sample_shape;
  d.classes = m->classes;
  const std::size_t features = d.features();
  const std::size_t wanted = limit > 0 && limit < m->items ? limit : static_cast<std::size_t>(m->items);
  // Open every shard first: a missing or mislisted one fails now, before any copying, even
  // when `limit` stops short of it.
  std::vector<pp::record_reader> shards;
  shards.reserve(m->shards.size());
  for (std::size_t i = 0; i < m->shards.size(); ++i) {
    auto r = pp::open_shard(dir, *m, i);
    if (!r) return r.error();
    shards.push_back(std::move(*r));
  }
  d.x.reserve(wanted * features);
  d.y.reserve(wanted);
  pp::key_digest keys;
  for (auto& r : shards) {
    while (d.y.size() < wanted) {
      auto rec = r.next();
      if (!rec) return rec.error();  // data_loss: the record's CRC, naming file and offset
      if (!*rec) break;
      const auto& v = **rec;
      const auto where = [&] { return r.path() + ": record " + std::to_string(v.index); };
      if (v.payload.size() != *payload)
        return error(error_code::invalid_argument,
                     where() + " has a payload of " + std::to_string(v.payload.size()) + " bytes; the schema \"" +
                       m->schema + "\" needs " + std::to_string(*payload) + " (the pipeline wrote samples of "
                                                                          "another shape: run it again)");
      if (v.label < 0 || v.label >= m->classes)
        return error(error_code::invalid_argument,
                     where() + " has label " + std::to_string(v.label) + ", outside [0, " +
                       std::to_string(m->classes) + ") (the manifest's classes): fix the pipeline's labels or classes");
      if (f32) {
        const std::size_t at = d.x.size();
        append_f32(v.payload, features, d.x);
        for (std::size_t i = at; i < d.x.size(); ++i) {
          if (!std::isfinite(d.x[i]))
            return error(error_code::invalid_argument,
                         where() + " holds a value that is not finite (" + std::to_string(d.x[i]) +
                           " at position " + std::to_string(i - at) + "): a model cannot train on it");
        }
      } else {
        for (char c : v.payload) d.x.push_back(static_cast<float>(static_cast<unsigned char>(c)) / 255.0f);
      }
      d.y.push_back(v.label);
      keys.add(v.key);
    }
  }
  // Every record read: the keys must be the ones the manifest's checksum names.
  if (wanted == m->items && keys.hex() != m->key_checksum)
    return error(error_code::data_loss, dir + ": the key checksum over the " + std::to_string(keys.count) +
                                          " records read is " + keys.hex() + ", its manifest.json says " +
                                          m->key_checksum + " (records were lost, added twice or changed)");
  if (d.y.empty()) return error(error_code::invalid_argument, dir + " holds no records");
  return d;
}

} // namespace celer::actors
