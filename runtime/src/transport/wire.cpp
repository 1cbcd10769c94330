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

std::vector<std::string> encode(const protocol::message& m) {
  std::vector<std::string> bulk;
  protocol::bulk_sink() = &bulk;
  std::string body;
  try {
    body = std::visit([](const auto& msg) { return detail::pack(msg); }, m);
  } catch (...) {
    protocol::bulk_sink() = nullptr;
    throw;
  }
  protocol::bulk_sink() = nullptr;
  header h{std::string(magic), protocol_version, static_cast<std::uint32_t>(m.index()),
           body.size(), static_cast<std::uint32_t>(bulk.size())};
  std::vector<std::string> frames;
  frames.reserve(2 + bulk.size());
  frames.push_back(detail::pack(h));
  frames.push_back(std::move(body));
  for (auto& b : bulk) frames.push_back(std::move(b));
  return frames;
}

expected<protocol::message> decode(std::span<const std::string_view> frames,
                                   std::size_t max_body_bytes) {
  if (frames.size() < 2 || frames.size() > 2 + max_bulk_frames) {
    return error(error_code::invalid_argument,
                 "a message has 2 frames (header, body) and up to " +
                   std::to_string(max_bulk_frames) + " bulk frames, got " +
                   std::to_string(frames.size()));
  }
  if (frames[0].size() > max_header_bytes) {
    return error(error_code::invalid_argument,
                 "header frame of " + std::to_string(frames[0].size()) + " bytes (at most " +
                   std::to_string(max_header_bytes) + ")");
  }
  auto h = bounded_unpack<header>(frames[0], "header");
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
  std::uint64_t total = frames[1].size();
  for (std::size_t i = 2; i < frames.size(); ++i) total += frames[i].size();
  if (h->body_size > max_body_bytes || total > max_body_bytes) {
    return error(error_code::resource_exhausted,
                 "message of " + std::to_string(std::max<std::uint64_t>(h->body_size, total)) +
                   " bytes exceeds the limit of " + std::to_string(max_body_bytes));
  }
  if (h->body_size != frames[1].size()) {
    return error(error_code::invalid_argument,
                 "header says " + std::to_string(h->body_size) + " body bytes, frame has " +
                   std::to_string(frames[1].size()) + " (truncated?)");
  }
  if (h->bulk_frames != frames.size() - 2) {
    return error(error_code::invalid_argument,
                 "header says " + std::to_string(h->bulk_frames) + " bulk frames, message has " +
                   std::to_string(frames.size() - 2));
  }
  protocol::bulk_frames bulk(frames.subspan(2));
  struct scoped_source {
    explicit scoped_source(protocol::bulk_frames* b) { protocol::bulk_source() = b; }
    ~scoped_source() { protocol::bulk_source() = nullptr; }
    scoped_source(const scoped_source&) = delete;
    scoped_source& operator=(const scoped_source&) = delete;
  } scope(&bulk);
  auto m = decoders[h->type](frames[1]);
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
