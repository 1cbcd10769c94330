#include "transport/wire.hpp"

#include <celer/version.hpp>

#include <array>
#include <utility>

namespace celer::wire {
namespace {

using decoder = expected<protocol::message> (*)(std::string_view body);

template <std::size_t I>
expected<protocol::message> decode_alternative(std::string_view body) {
  using T = std::variant_alternative_t<I, protocol::message>;
  protocol::message probe{std::in_place_index<I>};
  auto v = bounded_unpack<T>(body, protocol::name_of(probe));
  if (!v) return v.error();
  return protocol::message{std::in_place_index<I>, std::move(*v)};
}

template <std::size_t... I>
constexpr std::array<decoder, sizeof...(I)> make_decoders(std::index_sequence<I...>) {
  return {&decode_alternative<I>...};
}

constexpr auto decoders =
  make_decoders(std::make_index_sequence<std::variant_size_v<protocol::message>>{});

} // namespace

std::string encode_hello(const hello& h) { return detail::pack(h); }

expected<hello> decode_hello(std::string_view frame) {
  if (frame.size() > max_hello_bytes) {
    return error(error_code::invalid_argument,
                 "hello of " + std::to_string(frame.size()) + " bytes (at most " +
                   std::to_string(max_hello_bytes) + ")");
  }
  auto h = bounded_unpack<hello>(frame, "hello");
  if (!h) return h.error();
  if (h->magic != magic) return error(error_code::invalid_argument, "not a celer hello");
  if (h->version != protocol_version) {
    return error(error_code::failed_precondition,
                 "protocol version " + std::to_string(h->version) + ", this process speaks " +
                   std::to_string(protocol_version));
  }
  return h;
}

namespace {

/// msgpack's packer writing straight into the frame.
struct string_writer {
  std::string* out;
  void write(const char* data, std::size_t n) { out->append(data, n); }
};

} // namespace

encoded encode_shared(const protocol::message& m, std::string_view prefix) {
  encoded out;
  std::string& frame = out.message;
  frame.reserve(prefix.size() + 128);
  frame.append(prefix);
  protocol::bulk_sink() = &out.bulk;
  try {
    string_writer w{&frame};
    std::visit([&](const auto& msg) { msgpack::pack(w, msg); }, m);
  } catch (...) {
    protocol::bulk_sink() = nullptr;
    throw;
  }
  protocol::bulk_sink() = nullptr;
  const header h{std::string(magic), protocol_version, static_cast<std::uint32_t>(m.index()),
                 frame.size() - prefix.size(), static_cast<std::uint32_t>(out.bulk.size())};
  const std::size_t before = frame.size();
  string_writer w{&frame};
  msgpack::pack(w, h);
  frame.push_back(static_cast<char>(frame.size() - before));
  return out;
}

std::vector<std::string> encode(const protocol::message& m, std::string_view prefix) {
  auto e = encode_shared(m, prefix);
  std::vector<std::string> frames;
  frames.reserve(1 + e.bulk.size());
  frames.push_back(std::move(e.message));
  for (const auto& b : e.bulk) frames.emplace_back(b.view());
  return frames;
}

std::string message_frame(std::string_view body, std::string_view packed_header) {
  std::string frame;
  frame.reserve(body.size() + packed_header.size() + 1);
  frame.append(body);
  frame.append(packed_header);
  frame.push_back(static_cast<char>(packed_header.size()));
  return frame;
}

expected<frame_parts> split(std::string_view frame) {
  if (frame.empty()) return error(error_code::invalid_argument, "an empty message frame");
  const std::size_t header_size = static_cast<unsigned char>(frame.back());
  if (header_size > max_header_bytes || header_size + 1 > frame.size()) {
    return error(error_code::invalid_argument,
                 "a message frame of " + std::to_string(frame.size()) + " bytes says its header has " +
                   std::to_string(header_size) + " (at most " + std::to_string(max_header_bytes) + ")");
  }
  const std::size_t body_size = frame.size() - 1 - header_size;
  return frame_parts{frame.substr(0, body_size), frame.substr(body_size, header_size)};
}

expected<header> peek_header(std::string_view frame) {
  auto parts = split(frame);
  if (!parts) return parts.error();
  return bounded_unpack<header>(parts->header, "header");
}

expected<protocol::message> decode(std::span<const std::string_view> frames,
                                   std::size_t max_body_bytes) {
  return decode(frames, max_body_bytes, {});
}

expected<protocol::message> decode(std::span<const std::string_view> frames,
                                   std::size_t max_body_bytes,
                                   std::span<const std::shared_ptr<const void>> owners) {
  if (frames.empty() || frames.size() > 1 + max_bulk_frames) {
    return error(error_code::invalid_argument,
                 "a message has a message frame and up to " + std::to_string(max_bulk_frames) +
                   " bulk frames, got " + std::to_string(frames.size()) + " frames");
  }
  auto parts = split(frames[0]);
  if (!parts) return parts.error();
  const std::string_view body = parts->body;
  auto h = bounded_unpack<header>(parts->header, "header");
  if (!h) return h.error();
  if (h->magic != magic) return error(error_code::invalid_argument, "not a celer message");
  if (h->version != protocol_version) {
    return error(error_code::failed_precondition,
                 "protocol version " + std::to_string(h->version) + ", this process speaks " +
                   std::to_string(protocol_version));
  }
  if (h->type >= decoders.size()) {
    return error(error_code::invalid_argument, "unknown message type " + std::to_string(h->type));
  }
  std::uint64_t total = body.size();
  for (std::size_t i = 1; i < frames.size(); ++i) total += frames[i].size();
  if (h->body_size > max_body_bytes || total > max_body_bytes) {
    return error(error_code::resource_exhausted,
                 "message of " + std::to_string(std::max<std::uint64_t>(h->body_size, total)) +
                   " bytes exceeds the limit of " + std::to_string(max_body_bytes));
  }
  if (h->body_size != body.size()) {
    return error(error_code::invalid_argument,
                 "header says " + std::to_string(h->body_size) + " body bytes, frame has " +
                   std::to_string(body.size()) + " (truncated?)");
  }
  if (h->bulk_frames != frames.size() - 1) {
    return error(error_code::invalid_argument,
                 "header says " + std::to_string(h->bulk_frames) + " bulk frames, message has " +
                   std::to_string(frames.size() - 1));
  }
  protocol::bulk_frames bulk(frames.subspan(1), owners);
  struct scoped_source {
    explicit scoped_source(protocol::bulk_frames* b) { protocol::bulk_source() = b; }
    ~scoped_source() { protocol::bulk_source() = nullptr; }
    scoped_source(const scoped_source&) = delete;
    scoped_source& operator=(const scoped_source&) = delete;
  } scope(&bulk);
  auto m = decoders[h->type](body);
  if (m && bulk.used_count != bulk.frames.size()) {
    // The encoder sends only frames it references; an unreferenced one is padding that the
    // receiver would hold for nothing.
    return error(error_code::invalid_argument,
                 std::string(protocol::name_of(*m)) + ": " + std::to_string(bulk.frames.size()) +
                   " bulk frames announced, " + std::to_string(bulk.used_count) + " referenced");
  }
  return m;
}

} // namespace celer::wire
