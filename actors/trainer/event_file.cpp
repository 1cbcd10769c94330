// TensorBoard event files: TFRecord framing around hand-encoded tensorflow.Event messages
// (metrics_log.hpp). The protobuf subset is small enough to write by hand:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//             Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
#include <celer/actors/trainer/metrics_log.hpp>

#include "buffered_file.hpp"

#include <bit>
#include <cerrno>
#include <cmath>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unistd.h>

namespace celer::trainer {
namespace fs = std::filesystem;
namespace {

// ---- protobuf wire format, the parts an Event needs ----

enum wire_type : unsigned { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_tag(std::string& out, unsigned field, wire_type type) { put_varint(out, (field << 3) | type); }
void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_bytes(std::string& out, unsigned field, std::string_view bytes) {
  put_tag(out, field, length_delimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

std::string encode_event(double wall_time, std::int64_t step, std::string_view file_version,
                         std::span<const scalar> values) {
  std::string event;
  put_tag(event, 1, fixed64);
  put_le(event, std::bit_cast<std::uint64_t>(wall_time), 8);
  if (step != 0) {  // proto3 leaves a default out; a negative step takes ten bytes
    put_tag(event, 2, varint);
    put_varint(event, static_cast<std::uint64_t>(step));
  }
  if (!file_version.empty()) put_bytes(event, 3, file_version);
  if (!values.empty()) {
    std::string summary, value;
    for (const auto& s : values) {
      value.clear();
      put_bytes(value, 1, s.tag);
      put_tag(value, 2, fixed32);
      put_le(value, std::bit_cast<std::uint32_t>(static_cast<float>(s.value)), 4);
      put_bytes(summary, 1, value);
    }
    put_bytes(event, 5, summary);
  }
  return event;
}

/// TFRecord: length, masked CRC of the length, data, masked CRC of the data.
std::string frame(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_le(record, data.size(), 8);
  put_le(record, mask_crc(crc32c(record.data(), 8)), 4);
  record.append(data);
  put_le(record, mask_crc(crc32c(data)), 4);
  return record;
}

double seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// ---- reading ----

std::uint64_t get_le(std::string_view bytes, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]))
         << (8 * i);
  }
  return v;
}

/// Reads protobuf fields from a message's bytes; false at the end or on malformed input
/// (`bad` then says why).
struct field_reader {
  std::string_view data;
  std::size_t at = 0;
  std::string bad;

  bool varint_at(std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= data.size()) {
        bad = "a varint runs past the end";
        return false;
      }
      const auto b = static_cast<unsigned char>(data[at++]);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    bad = "a varint is longer than 10 bytes";
    return false;
  }

  /// The next field: its number, wire type, and its value (varint or fixed as a number,
  /// length-delimited as bytes).
  bool next(unsigned& field, unsigned& type, std::uint64_t& number, std::string_view& bytes) {
    if (at >= data.size()) return false;
    std::uint64_t key = 0;
    if (!varint_at(key)) return false;
    field = static_cast<unsigned>(key >> 3);
    type = static_cast<unsigned>(key & 7);
    switch (type) {
      case varint: return varint_at(number);
      case fixed64:
      case fixed32: {
        const std::size_t n = type == fixed64 ? 8 : 4;
        if (data.size() - at < n) {
          bad = "a fixed field runs past the end";
          return false;
        }
        number = get_le(data, at, static_cast<int>(n));
        at += n;
        return true;
      }
      case length_delimited: {
        std::uint64_t len = 0;
        if (!varint_at(len)) return false;
        if (len > data.size() - at) {
          bad = "field " + std::to_string(field) + " runs past the end";
          return false;
        }
        bytes = data.substr(at, static_cast<std::size_t>(len));
        at += static_cast<std::size_t>(len);
        return true;
      }
      default:
        bad = "field " + std::to_string(field) + " has wire type " + std::to_string(type) +
              ", which Event does not use";
        return false;
    }
  }
};

/// Decodes one Event; an empty string, or why it does not parse.
std::string decode_event(std::string_view data, event_record& e) {
  field_reader r{data};
  unsigned field = 0, type = 0;
  std::uint64_t number = 0;
  std::string_view bytes;
  const auto wrong = [](const char* name) { return std::string(name) + " has the wrong wire type"; };
  while (r.next(field, type, number, bytes)) {
    if (field == 1) {
      if (type != fixed64) return wrong("wall_time");
      e.wall_time = std::bit_cast<double>(number);
    } else if (field == 2) {
      if (type != varint) return wrong("step");
      e.step = static_cast<std::int64_t>(number);
    } else if (field == 3) {
      if (type != length_delimited) return wrong("file_version");
      e.file_version = std::string(bytes);
    } else if (field == 5) {
      if (type != length_delimited) return wrong("summary");
      field_reader summary{bytes};
      std::string_view value_bytes;
      while (summary.next(field, type, number, value_bytes)) {
        if (field != 1) continue;
        if (type != length_delimited) return wrong("Summary.value");
        field_reader value{value_bytes};
        scalar s;
        bool simple = false;
        std::string_view tag;
        while (value.next(field, type, number, tag)) {
          if (field == 1 && type == length_delimited) {
            s.tag = std::string(tag);
          } else if (field == 2 && type == fixed32) {
            s.value = static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(number)));
            simple = true;
          }
        }
        if (!value.bad.empty()) return "Summary.value: " + value.bad;
        // Values without a simple_value (images, histograms, TF2 tensors) are not scalars.
        if (simple) e.values.push_back(std::move(s));
      }
      if (!summary.bad.empty()) return "Summary: " + summary.bad;
    }
  }
  return r.bad;
}

} // namespace

// ---- the writer ----

struct event_file_writer::impl {
  explicit impl(const event_file_options& o) : file(o.flush, o.clock) {}
  detail::buffered_file file;
  std::uint64_t records = 0;

  expected<void> add(std::int64_t step, std::span<const scalar> values) {
    const double wall = seconds(file.now());
    if (auto ok = file.append(frame(encode_event(wall, step, {}, values))); !ok) return ok;
    ++records;
    return {};
  }
};

event_file_writer::event_file_writer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
event_file_writer::event_file_writer(event_file_writer&&) noexcept = default;
event_file_writer& event_file_writer::operator=(event_file_writer&&) noexcept = default;
event_file_writer::~event_file_writer() {
  if (impl_) (void)impl_->file.close();  // an error here has nowhere to go; close() reports it
}

expected<event_file_writer> event_file_writer::open(event_file_options opts) {
  if (opts.dir.empty()) return error(error_code::invalid_argument, "event_file_writer: dir is empty");
  if (auto ok = detail::check_policy(opts.flush, "event_file_writer"); !ok) return ok.error();
  std::error_code ec;
  fs::create_directories(opts.dir, ec);
  if (ec) return detail::io_error(ec.value(), "making the folder", opts.dir);
  std::string host = opts.hostname.empty() ? this_host() : opts.hostname;
  for (char& c : host) {
    if (c == '/') c = '_';
  }
  auto p = std::make_unique<impl>(opts);
  const auto opened = p->file.now();
  const std::string base = (fs::path(opts.dir) / "events.out.tfevents.").string() +
                           std::to_string(static_cast<std::int64_t>(std::floor(seconds(opened)))) +
                           "." + host;
  // Two writers in one folder within one second would pick one name: O_EXCL never lets
  // the second overwrite the first's file, it takes the next suffix.
  for (int attempt = 0;; ++attempt) {
    const std::string path = attempt == 0 ? base : base + "." + std::to_string(attempt);
    int err = 0;
    auto ok = p->file.open(path, O_CREAT | O_EXCL | O_APPEND, err);
    if (ok) break;
    if (err != EEXIST || attempt == 100) return ok.error();
  }
  if (auto ok = p->file.append(frame(encode_event(seconds(opened), 0, "brain.Event:2", {}))); !ok) {
    return ok.error();
  }
  // TensorBoard learns of the file from its first record: write it now.
  if (auto ok = p->file.flush(); !ok) return ok.error();
  p->records = 1;
  return event_file_writer(std::move(p));
}

expected<void> event_file_writer::add_scalar(std::string_view tag, std::int64_t step, double value) {
  const scalar one{std::string(tag), value};
  return add_scalars(step, std::span<const scalar>(&one, 1));
}

expected<void> event_file_writer::add_scalars(std::int64_t step, std::span<const scalar> values) {
  if (values.empty()) {
    return error(error_code::invalid_argument, "add_scalars: no values for step " + std::to_string(step));
  }
  for (const auto& s : values) {
    if (auto ok = detail::check_tag(s.tag); !ok) return ok;
  }
  return impl_->add(step, values);
}

expected<void> event_file_writer::flush() { return impl_->file.flush(); }
expected<void> event_file_writer::close() { return impl_->file.close(); }
const std::string& event_file_writer::path() const noexcept { return impl_->file.path(); }
std::uint64_t event_file_writer::records() const noexcept { return impl_->records; }

// ---- the reader ----

expected<event_file_contents> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return error(error_code::not_found, "no event file " + path);
    return detail::io_error(errno, "opening", path);
  }
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return detail::io_error(errno, "reading", path);

  event_file_contents out;
  std::size_t at = 0;
  const auto loss = [&](std::size_t record, std::size_t offset, const std::string& why) {
    return error(error_code::data_loss, path + ": record " + std::to_string(record) +
                                          " at byte " + std::to_string(offset) + ": " + why);
  };
  for (std::size_t record = 0; at < data.size(); ++record) {
    if (data.size() - at < 12) {
      out.truncated = true;
      break;
    }
    const std::uint64_t len = get_le(data, at, 8);
    if (mask_crc(crc32c(data.data() + at, 8)) != get_le(data, at + 8, 4)) {
      return loss(record, at, "the CRC of its length does not match");
    }
    if (len > data.size() - at - 12 || data.size() - at - 12 - len < 4) {
      out.truncated = true;
      break;
    }
    const std::string_view body(data.data() + at + 12, static_cast<std::size_t>(len));
    if (mask_crc(crc32c(body)) != get_le(data, at + 12 + len, 4)) {
      return loss(record, at, "the CRC of its data does not match");
    }
    event_record e;
    if (auto why = decode_event(body, e); !why.empty()) return loss(record, at, "Event: " + why);
    out.events.push_back(std::move(e));
    at += 12 + static_cast<std::size_t>(len) + 4;
  }
  return out;
}

} // namespace celer::trainer
