// Record files, "CELERRC1" (records.hpp; the byte layout is in actors/preprocess/README.md,
// which this file must match). All integers are little-endian. CRCs are zlib's CRC-32.
#include <celer/actors/preprocess/records.hpp>

#include "io_error.hpp"  // actors/common

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <limits>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace celer::preprocess {
namespace fs = std::filesystem;
namespace {

// ---- the layout (README.md, "Byte layout") ----
constexpr std::uint64_t header_fixed = 16;    // magic, version, schema size
constexpr std::uint64_t header_tail = 8;      // header CRC, reserved
constexpr std::uint64_t record_fixed = 20;    // CRC, key size, payload size, label
constexpr std::uint64_t trailer_size = 32;    // count, index offset, CRCs, end magic
constexpr std::size_t max_schema = 64 * 1024;
/// Payloads at least this large go from the caller's memory to the file, not via the buffer.
constexpr std::size_t direct_write = 256 * 1024;
/// The buffer is written out past this size.
constexpr std::size_t buffer_limit = 1024 * 1024;

constexpr std::uint64_t align8(std::uint64_t n) noexcept { return (n + 7) & ~std::uint64_t{7}; }
constexpr char zeros[8] = {};

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
std::uint64_t get_le(const char* p, int bytes) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

std::uint32_t crc(std::uint32_t running, const char* p, std::uint64_t n) noexcept {
  return static_cast<std::uint32_t>(
    ::crc32_z(running, reinterpret_cast<const Bytef*>(p), static_cast<z_size_t>(n)));
}
std::uint32_t crc(std::uint32_t running, std::string_view s) noexcept {
  return crc(running, s.data(), s.size());
}

std::string hex32(std::uint64_t v) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08llx", static_cast<unsigned long long>(v));
  return text;
}

expected<void> fsync_folder(const std::string& file) {
  fs::path dir = fs::path(file).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return actors::detail::io_error(errno, "opening the folder", dir.string());
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return actors::detail::io_error(err, "syncing the folder", dir.string());
  return {};
}

} // namespace

// ---------------------------------------------------------------------------------------
// record_writer

namespace {

/// A record file's header for `schema` (README.md, "Byte layout").
std::string header_bytes(const std::string& schema) {
  std::string header(record_file_magic);
  put_le(header, record_file_version, 4);
  put_le(header, schema.size(), 4);
  header += schema;
  header.append(align8(header.size()) - header.size(), '\0');
  put_le(header, crc(0, header), 4);
  put_le(header, 0, 4);  // reserved
  return header;
}

} // namespace

expected<record_writer> record_writer::create(std::string path, std::string schema) {
  if (path.empty()) return error(error_code::invalid_argument, "record_writer: the path is empty");
  if (schema.size() > max_schema) {
    return error(error_code::invalid_argument,
                 "record_writer " + path + ": the schema string is " +
                   std::to_string(schema.size()) +
                   " bytes; at most " + std::to_string(max_schema) + " fit in the header");
  }
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) return actors::detail::io_error(ec.value(), "making the folder", parent.string());
  }
  record_writer w;
  w.path_ = std::move(path);
  w.part_ = w.path_ + ".part";
  // O_TRUNC: a .part left by a crash is ours to replace (README.md, "Writing").
  w.fd_ = ::open(w.part_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0) return actors::detail::io_error(errno, "creating", w.part_);

  if (auto ok = w.write_out(header_bytes(schema)); !ok) return ok.error();
  return w;
}

expected<record_writer> record_writer::in_memory(std::string schema) {
  if (schema.size() > max_schema) {
    return error(error_code::invalid_argument,
                 "record_writer: the schema string is " + std::to_string(schema.size()) +
                   " bytes; at most " + std::to_string(max_schema) + " fit in the header");
  }
  record_writer w;
  w.path_ = "(in memory)";
  w.in_memory_ = true;
  if (auto ok = w.write_out(header_bytes(schema)); !ok) return ok.error();
  return w;
}

expected<std::string> record_writer::finish_in_memory() {
  if (!in_memory_)
    return error(error_code::failed_precondition,
                 "record_writer " + path_ + ": finish_in_memory() of a file writer");
  if (auto ok = finish(); !ok) return ok.error();
  return std::move(buffer_);
}

record_writer::record_writer(record_writer&& other) noexcept
  : path_(std::move(other.path_)), part_(std::move(other.part_)), fd_(other.fd_),
    finished_(other.finished_), broken_(std::move(other.broken_)),
    buffer_(std::move(other.buffer_)), size_(other.size_), file_crc_(other.file_crc_),
    offsets_(std::move(other.offsets_)), in_memory_(other.in_memory_) {
  other.fd_ = -1;
  other.finished_ = true;  // the moved-from writer owns no file
}

record_writer& record_writer::operator=(record_writer&& other) noexcept {
  if (this != &other) {
    close_and_remove();
    path_ = std::move(other.path_);
    part_ = std::move(other.part_);
    fd_ = other.fd_;
    finished_ = other.finished_;
    broken_ = std::move(other.broken_);
    buffer_ = std::move(other.buffer_);
    size_ = other.size_;
    file_crc_ = other.file_crc_;
    offsets_ = std::move(other.offsets_);
    in_memory_ = other.in_memory_;
    other.fd_ = -1;
    other.finished_ = true;
  }
  return *this;
}

record_writer::~record_writer() { close_and_remove(); }

void record_writer::close_and_remove() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!finished_ && !part_.empty()) ::unlink(part_.c_str());
  finished_ = true;
}

expected<void> record_writer::fail(error err) {
  broken_ = err;
  return err;
}

/// Buffers `bytes`, counting them into the size and whole-file CRC.
expected<void> record_writer::write_out(std::string_view bytes) {
  buffer_.append(bytes);
  size_ += bytes.size();
  file_crc_ = crc(file_crc_, bytes);
  if (buffer_.size() >= buffer_limit) return flush();
  return {};
}

expected<void> record_writer::flush() {
  if (in_memory_) return {};  // the buffer is the file
  std::size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(actors::detail::io_error(errno, "writing", part_));
    }
    done += static_cast<std::size_t>(n);
  }
  buffer_.clear();
  return {};
}

expected<void> record_writer::append(std::string_view key, std::int32_t label,
                                     std::string_view payload) {
  if (broken_) {
    return error(error_code::failed_precondition,
                 "record_writer " + path_ + ": an earlier write failed: " + broken_->message());
  }
  if (finished_) {
    return error(error_code::failed_precondition, "record_writer " + path_ + ": already finished");
  }
  if (key.size() > std::numeric_limits<std::uint32_t>::max()) {
    return error(error_code::invalid_argument,
                 "record_writer " + path_ + ": a key of " + std::to_string(key.size()) +
                   " bytes; keys are at most 4 GiB - 1");
  }
  // The frame after its CRC: sizes, label, key and padding, then payload and padding.
  std::string head;
  head.reserve(align8(record_fixed + key.size()));
  put_le(head, key.size(), 4);
  put_le(head, payload.size(), 8);
  put_le(head, static_cast<std::uint32_t>(label), 4);
  head.append(key);
  head.append(align8(record_fixed + key.size()) - record_fixed - key.size(), '\0');
  const std::string_view tail(zeros, align8(payload.size()) - payload.size());
  std::uint32_t record_crc = crc(0, head);
  record_crc = crc(record_crc, payload);
  record_crc = crc(record_crc, tail);

  offsets_.push_back(size_);
  std::string crc_bytes;
  put_le(crc_bytes, record_crc, 4);
  if (auto ok = write_out(crc_bytes); !ok) return ok;
  if (auto ok = write_out(head); !ok) return ok;
  if (payload.size() < direct_write || in_memory_) {
    if (auto ok = write_out(payload); !ok) return ok;
  } else {
    // Straight from the caller's memory: no copy into the buffer, and the whole-file CRC
    // continues by crc32_combine instead of a second pass over the payload.
    if (auto ok = flush(); !ok) return ok;
    std::size_t done = 0;
    while (done < payload.size()) {
      const ssize_t n = ::write(fd_, payload.data() + done, payload.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail(actors::detail::io_error(errno, "writing", part_));
      }
      done += static_cast<std::size_t>(n);
    }
    const auto payload_crc = crc(0, payload);
    file_crc_ = static_cast<std::uint32_t>(
      ::crc32_combine(file_crc_, payload_crc, static_cast<z_off_t>(payload.size())));
    size_ += payload.size();
  }
  return write_out(tail);
}

expected<void> record_writer::finish() {
  if (broken_) {
    return error(error_code::failed_precondition,
                 "record_writer " + path_ + ": an earlier write failed: " + broken_->message());
  }
  if (finished_) {
    return error(error_code::failed_precondition, "record_writer " + path_ + ": already finished");
  }
  const std::uint64_t index_offset = size_;
  std::string index;
  index.reserve(offsets_.size() * 8);
  for (auto o : offsets_) put_le(index, o, 8);
  if (auto ok = write_out(index); !ok) return ok;
  std::string trailer;
  put_le(trailer, offsets_.size(), 8);
  put_le(trailer, index_offset, 8);
  put_le(trailer, crc(0, index), 4);
  file_crc_ = crc(file_crc_, trailer);  // the CRC covers everything before itself
  put_le(trailer, file_crc_, 4);
  trailer += record_file_end_magic;
  buffer_ += trailer;  // not through write_out: the whole-file CRC is complete
  size_ += trailer.size();
  if (auto ok = flush(); !ok) return ok;
  if (in_memory_) {
    finished_ = true;
    offsets_.clear();
    offsets_.shrink_to_fit();
    return {};
  }
  if (::fsync(fd_) != 0) return fail(actors::detail::io_error(errno, "syncing", part_));
  if (::close(fd_) != 0) {
    fd_ = -1;
    return fail(actors::detail::io_error(errno, "closing", part_));
  }
  fd_ = -1;
  if (::rename(part_.c_str(), path_.c_str()) != 0) {
    return fail(actors::detail::io_error(errno, "renaming " + part_ + " to", path_));
  }
  finished_ = true;
  offsets_.clear();
  offsets_.shrink_to_fit();
  return fsync_folder(path_);
}

// ---------------------------------------------------------------------------------------
// record_reader

record_reader::record_reader(record_reader&& other) noexcept
  : path_(std::move(other.path_)), data_(other.data_), owned_(other.owned_), size_(other.size_),
    schema_(other.schema_), first_record_(other.first_record_),
    index_offset_(other.index_offset_), count_(other.count_), position_(other.position_) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.count_ = 0;
}

record_reader& record_reader::operator=(record_reader&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr && owned_) ::munmap(const_cast<char*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = other.data_;
    owned_ = other.owned_;
    size_ = other.size_;
    schema_ = other.schema_;
    first_record_ = other.first_record_;
    index_offset_ = other.index_offset_;
    count_ = other.count_;
    position_ = other.position_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.count_ = 0;
  }
  return *this;
}

record_reader::~record_reader() {
  if (data_ != nullptr && owned_) ::munmap(const_cast<char*>(data_), size_);
}

error record_reader::damaged(std::uint64_t offset, const std::string& what) const {
  return error(error_code::data_loss,
               path_ + ": " + what + " at byte offset " + std::to_string(offset));
}

std::uint64_t record_reader::index_entry(std::uint64_t i) const noexcept {
  return get_le(data_ + index_offset_ + 8 * i, 8);
}

expected<record_reader> record_reader::open(std::string path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return error(error_code::not_found, "record file " + path + " does not exist");
    }
    return actors::detail::io_error(err, "opening", path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return actors::detail::io_error(err, "reading the size of", path);
  }
  record_reader r;
  r.path_ = std::move(path);
  r.size_ = static_cast<std::uint64_t>(st.st_size);
  if (r.size_ > 0) {
    void* p = ::mmap(nullptr, r.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return actors::detail::io_error(err, "mapping", r.path_);
    }
    r.data_ = static_cast<const char*>(p);
  }
  ::close(fd);  // the mapping keeps the file
  return check_frame(std::move(r));
}

expected<record_reader> record_reader::view(std::string_view bytes, std::string name) {
  record_reader r;
  r.path_ = std::move(name);
  r.owned_ = false;
  r.size_ = bytes.size();
  r.data_ = bytes.empty() ? nullptr : bytes.data();
  return check_frame(std::move(r));
}

expected<record_reader> record_reader::check_frame(record_reader r) {
  const std::uint64_t size = r.size_;
  const std::string_view bytes(r.data_ == nullptr ? "" : r.data_, size);

  // Magic and version first, so a stranger file or a newer one says so plainly.
  const auto magic_part = std::min<std::uint64_t>(size, record_file_magic.size());
  if (bytes.substr(0, magic_part) != record_file_magic.substr(0, magic_part)) {
    return error(error_code::invalid_argument,
                 r.path_ + ": not a record file: bad magic at byte offset 0 (expected \"" +
                   std::string(record_file_magic) + "\")");
  }
  if (size < header_fixed) {
    return r.damaged(size, "truncated: the file ends inside its " +
                             std::to_string(header_fixed) + "-byte header");
  }
  if (const auto v = get_le(r.data_ + 8, 4); v != record_file_version) {
    return error(error_code::failed_precondition,
                 r.path_ + ": record file version " + std::to_string(v) +
                   " at byte offset 8; this build reads version " +
                   std::to_string(record_file_version));
  }
  const std::uint64_t schema_size = get_le(r.data_ + 12, 4);
  const std::uint64_t header_crc_at = align8(header_fixed + schema_size);
  r.first_record_ = header_crc_at + header_tail;
  if (r.first_record_ + trailer_size > size) {
    if (bytes.ends_with(record_file_end_magic)) {  // whole, so the size field is what is wrong
      return r.damaged(12, "header damaged: a schema of " + std::to_string(schema_size) +
                             " bytes runs past the end of the file");
    }
    return r.damaged(size, "truncated: the file ends before its header (" +
                             std::to_string(r.first_record_) + " bytes) and trailer");
  }
  if (const auto stored = get_le(r.data_ + header_crc_at, 4),
      computed = std::uint64_t{crc(0, r.data_, header_crc_at)};
      stored != computed) {
    return r.damaged(header_crc_at, "header checksum mismatch (stored " + hex32(stored) +
                                      ", computed " + hex32(computed) + ")");
  }
  r.schema_ = bytes.substr(header_fixed, schema_size);

  // The trailer: a file cut anywhere lacks the end magic.
  const std::uint64_t trailer_at = size - trailer_size;
  if (bytes.substr(size - 8) != record_file_end_magic) {
    return r.damaged(size - 8, "truncated or never finished: no \"" +
                                 std::string(record_file_end_magic) + "\" at the end");
  }
  r.count_ = get_le(r.data_ + trailer_at, 8);
  r.index_offset_ = get_le(r.data_ + trailer_at + 8, 8);
  if (r.index_offset_ < r.first_record_ || r.index_offset_ > trailer_at ||
      r.index_offset_ % 8 != 0 || r.count_ != (trailer_at - r.index_offset_) / 8 ||
      (trailer_at - r.index_offset_) % 8 != 0) {
    const auto count = r.count_;
    r.count_ = 0;
    return r.damaged(trailer_at, "trailer inconsistent with the file's size (" +
                                   std::to_string(count) + " records, index at byte " +
                                   std::to_string(r.index_offset_) + ")");
  }
  if (const auto stored = get_le(r.data_ + trailer_at + 16, 4),
      computed = std::uint64_t{crc(0, r.data_ + r.index_offset_, trailer_at - r.index_offset_)};
      stored != computed) {
    r.count_ = 0;
    return r.damaged(r.index_offset_, "index checksum mismatch (stored " + hex32(stored) +
                                        ", computed " + hex32(computed) + ")");
  }
  // Offsets start at the first record, rise by at least a record's fixed part, stay 8-aligned
  // and below the index; each record's own check then sees that its frame fills its slot.
  std::uint64_t expected_first = r.first_record_;
  for (std::uint64_t i = 0; i < r.count_; ++i) {
    const auto o = r.index_entry(i);
    // index_offset_ >= first_record_ >= 24, so the subtraction cannot wrap.
    const bool ok = o % 8 == 0 && o >= expected_first &&
                    o <= r.index_offset_ - align8(record_fixed) && (i > 0 || o == r.first_record_);
    if (!ok) {
      const auto at = r.index_offset_ + 8 * i;
      r.count_ = 0;
      return r.damaged(at, "index entry " + std::to_string(i) + " (" + std::to_string(o) +
                             ") is out of order or out of range");
    }
    expected_first = o + align8(record_fixed);
  }
  if (r.count_ == 0 && r.index_offset_ != r.first_record_) {
    return r.damaged(r.first_record_, "bytes between the header and the index of an empty file");
  }
  return r;
}

expected<record_view> record_reader::at(std::uint64_t i) const {
  if (i >= count_) {
    return error(error_code::invalid_argument, path_ + ": record " + std::to_string(i) +
                                                 " asked for; the file holds " +
                                                 std::to_string(count_));
  }
  const std::uint64_t o = index_entry(i);
  const std::uint64_t end = i + 1 < count_ ? index_entry(i + 1) : index_offset_;
  const std::uint64_t slot = end - o;  // open() checked end >= o + 24
  const char* p = data_ + o;
  const std::uint64_t key_size = get_le(p + 4, 4);
  const std::uint64_t payload_size = get_le(p + 8, 8);
  const std::uint64_t head = align8(record_fixed + key_size);
  if (head > slot || payload_size > slot - head || head + align8(payload_size) != slot) {
    return damaged(o, "record " + std::to_string(i) + " has sizes (key " +
                        std::to_string(key_size) + ", payload " + std::to_string(payload_size) +
                        ") that do not fill its " + std::to_string(slot) + " bytes");
  }
  if (const auto stored = get_le(p, 4), computed = std::uint64_t{crc(0, p + 4, slot - 4)};
      stored != computed) {
    return damaged(o, "checksum mismatch in record " + std::to_string(i) + " (stored " +
                        hex32(stored) + ", computed " + hex32(computed) + ")");
  }
  record_view v;
  v.key = std::string_view(p + record_fixed, key_size);
  v.label = static_cast<std::int32_t>(static_cast<std::uint32_t>(get_le(p + 16, 4)));
  v.payload = std::string_view(p + head, payload_size);
  v.offset = o;
  v.index = i;
  return v;
}

expected<std::optional<record_view>> record_reader::next() {
  if (position_ >= count_) return std::optional<record_view>{};
  auto v = at(position_);
  if (!v) return v.error();
  ++position_;
  return std::optional<record_view>(*v);
}

expected<void> record_reader::verify() const {
  for (std::uint64_t i = 0; i < count_; ++i) {
    if (auto v = at(i); !v) return v.error();
  }
  // What the per-part checks leave: the trailer's own fields.
  const std::uint64_t crc_at = size_ - trailer_size + 20;
  if (const auto stored = get_le(data_ + crc_at, 4),
      computed = std::uint64_t{crc(0, data_, crc_at)};
      stored != computed) {
    return damaged(crc_at, "file checksum mismatch (stored " + hex32(stored) + ", computed " +
                             hex32(computed) + ")");
  }
  return {};
}

} // namespace celer::preprocess
