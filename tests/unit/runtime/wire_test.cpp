// The wire encoding: every message round-trips; every kind of bad input is refused with an
// error value (never a crash, never an allocation the input cannot justify).
#include "transport/wire.hpp"

#include <celer/version.hpp>

#include <catch2/catch.hpp>

#include <random>

using namespace celer;

namespace {

constexpr std::size_t limit = 1 << 20;

expected<protocol::message> decode(const std::vector<std::string>& frames,
                                   std::size_t max_body = limit) {
  std::vector<std::string_view> views(frames.begin(), frames.end());
  return wire::decode(views, max_body);
}

protocol::task_spec sample_spec() {
  protocol::task_spec s;
  s.id = task_id::random();
  s.function = "add";
  s.args.push_back({false, {}, {}, detail::pack(1)});
  s.args.push_back({true, object_id::random(), address{unique_id::random(), "tcp://a:1"}, {}});
  s.resources = *protocol::make_request(1, 0.5, 0, {{"ssd", 2}});
  s.owner = address{unique_id::random(), "tcp://b:2"};
  return s;
}

/// One message of every type, with fields filled in.
std::vector<protocol::message> every_message() {
  std::vector<protocol::message> all;
  for (std::size_t i = 0; i < std::variant_size_v<protocol::message>; ++i) {
    // Build each alternative by index so that a new message type is covered automatically.
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((i == I ? (all.emplace_back(std::in_place_index<I>), void()) : void()), ...);
    }(std::make_index_sequence<std::variant_size_v<protocol::message>>{});
  }
  all[0] = protocol::request_lease{sample_spec(), true};
  all[1] = protocol::execute_task{sample_spec()};
  return all;
}

} // namespace

TEST_CASE("every message type round-trips through the wire encoding", "[wire]") {
  for (const auto& m : every_message()) {
    auto frames = wire::encode(m);
    REQUIRE(frames.size() == 2);
    auto back = decode(frames);
    INFO(protocol::name_of(m));
    REQUIRE(back.has_value());
    REQUIRE(back->index() == m.index());
    REQUIRE(wire::encode(*back) == frames);  // same bytes again: nothing lost
  }
}

TEST_CASE("a message from another protocol version is refused", "[wire]") {
  auto frames = wire::encode(protocol::shutdown_component{"x"});
  wire::header h{std::string(wire::magic), protocol_version + 1, 22, frames[1].size()};
  frames[0] = detail::pack(h);
  auto r = decode(frames);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.error().code() == error_code::failed_precondition);
}

TEST_CASE("an unknown message type is refused", "[wire]") {
  auto frames = wire::encode(protocol::shutdown_component{"x"});
  frames[0] = detail::pack(wire::header{std::string(wire::magic), protocol_version, 9999,
                                        frames[1].size()});
  auto r = decode(frames);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.error().message().find("unknown message type") != std::string::npos);
}

TEST_CASE("a header claiming a 2 GiB body is refused before anything is read", "[wire]") {
  auto frames = wire::encode(protocol::shutdown_component{"x"});
  frames[0] = detail::pack(
    wire::header{std::string(wire::magic), protocol_version, 22, std::uint64_t{2} << 30});
  auto r = decode(frames);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.error().code() == error_code::resource_exhausted);
}

TEST_CASE("a body whose lengths claim more than it holds is refused", "[wire]") {
  // An array header claiming 2^32-1 elements, then nothing: must not allocate for them.
  std::string body = "\xdd\xff\xff\xff\xff";
  std::vector<std::string> frames{
    detail::pack(wire::header{std::string(wire::magic), protocol_version, 0, body.size()}),
    body};
  auto r = decode(frames);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.error().code() == error_code::invalid_argument);
  // A string claiming 2 GiB.
  std::string str = "\xdb\x80\x00\x00\x00";
  frames[0] = detail::pack(wire::header{std::string(wire::magic), protocol_version, 22, str.size()});
  frames[1] = str;
  REQUIRE_FALSE(decode(frames).has_value());
}

TEST_CASE("truncated frames, wrong frame counts and trailing bytes are refused", "[wire]") {
  auto frames = wire::encode(protocol::execute_task{sample_spec()});
  for (std::size_t cut = 0; cut < frames[1].size(); cut += 3) {
    auto t = frames;
    t[1].resize(cut);
    REQUIRE_FALSE(decode(t).has_value());
  }
  for (std::size_t cut = 0; cut < frames[0].size(); ++cut) {
    auto t = frames;
    t[0].resize(cut);
    REQUIRE_FALSE(decode(t).has_value());
  }
  REQUIRE_FALSE(decode({frames[0]}).has_value());
  REQUIRE_FALSE(decode({frames[0], frames[1], frames[1]}).has_value());
  auto trailing = frames;
  trailing[1] += '\x00';
  trailing[0] = detail::pack(
    wire::header{std::string(wire::magic), protocol_version, 1, trailing[1].size()});
  REQUIRE_FALSE(decode(trailing).has_value());
}

TEST_CASE("generated garbage never crashes any decoder", "[wire][fuzz]") {
  std::mt19937_64 gen(20261129);  // fixed seed: the same inputs every run
  const auto valid = every_message();
  std::size_t refused = 0, accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    const auto& m = valid[static_cast<std::size_t>(round) % valid.size()];
    auto frames = wire::encode(m);
    auto& body = frames[1];
    switch (round % 4) {
      case 0:  // random bytes of random length
        body.resize(gen() % 64);
        for (auto& c : body) c = static_cast<char>(gen());
        break;
      case 1:  // flip a few bytes of a valid body
        for (int k = 0; k < 3 && !body.empty(); ++k) body[gen() % body.size()] ^= static_cast<char>(1 + gen() % 255);
        break;
      case 2:  // cut it
        body.resize(body.empty() ? 0 : gen() % body.size());
        break;
      case 3:  // random bytes appended
        for (int k = 0; k < 8; ++k) body += static_cast<char>(gen());
        break;
    }
    frames[0] = detail::pack(wire::header{std::string(wire::magic), protocol_version,
                                          static_cast<std::uint32_t>(m.index()), body.size()});
    auto r = decode(frames);
    (r ? accepted : refused) += 1;
  }
  // Most mangled inputs are refused; some flips land in values and still decode. What
  // matters is that each call returned.
  REQUIRE(refused > 10000);
  REQUIRE(refused + accepted == 20000);
}

TEST_CASE("the hello decoder refuses garbage, other versions and oversized frames", "[wire][fuzz]") {
  const wire::hello good{std::string(wire::magic), protocol_version, job_id::random().hex(), "tcp://a:1"};
  auto ok = wire::decode_hello(wire::encode_hello(good));
  REQUIRE(ok.has_value());
  REQUIRE(ok->register_job == good.register_job);
  auto other = wire::decode_hello(
    wire::encode_hello({std::string(wire::magic), protocol_version + 1, "token", ""}));
  REQUIRE(other.error().code() == error_code::failed_precondition);
  REQUIRE(wire::decode_hello(std::string(wire::max_hello_bytes + 1, 'x')).error().code() ==
          error_code::invalid_argument);
  REQUIRE_FALSE(wire::decode_hello(wire::encode_hello({"nope", protocol_version, "t", ""})));

  std::mt19937_64 gen(7);
  const std::string valid = wire::encode_hello(good);
  std::size_t refused = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string frame = valid;
    switch (round % 3) {
      case 0:
        frame.resize(gen() % 80);
        for (auto& c : frame) c = static_cast<char>(gen());
        break;
      case 1:
        for (int k = 0; k < 3; ++k) frame[gen() % frame.size()] ^= static_cast<char>(1 + gen() % 255);
        break;
      case 2:
        frame.resize(gen() % frame.size());
        break;
    }
    refused += wire::decode_hello(frame).has_value() ? 0 : 1;
  }
  REQUIRE(refused > 10000);
}

TEST_CASE("large values travel as bulk frames after a small body", "[wire]") {
  protocol::task_result r;
  r.task = task_id::random();
  protocol::object_payload big, small;
  big.ok = small.ok = true;
  big.payload = std::string(1 << 20, 'b');
  small.payload = "tiny";
  r.returns = {big, small, big};
  auto frames = wire::encode(r);
  REQUIRE(frames.size() == 4);  // header, body, two bulk frames
  REQUIRE(frames[1].size() < 256);
  REQUIRE(frames[2].size() == (1u << 20));
  auto back = decode(frames, 4u << 20);
  REQUIRE(back.has_value());
  const auto& got = std::get<protocol::task_result>(*back);
  REQUIRE(got.returns[0].payload == big.payload);
  REQUIRE(got.returns[1].payload == "tiny");
  REQUIRE(got.returns[2].payload == big.payload);

  SECTION("a missing bulk frame is refused") {
    frames.pop_back();
    REQUIRE(decode(frames, 4u << 20).error().code() == error_code::invalid_argument);
  }
  SECTION("bulk frames together past the limit are refused unread") {
    REQUIRE(decode(frames, 1u << 20).error().code() == error_code::resource_exhausted);
  }
  SECTION("a body naming a bulk frame that does not exist is refused") {
    frames.pop_back();
    frames.pop_back();
    frames[0] = detail::pack(wire::header{std::string(wire::magic), protocol_version,
                                          static_cast<std::uint32_t>(protocol::message(r).index()),
                                          frames[1].size(), 0});
    REQUIRE(decode(frames, 4u << 20).error().code() == error_code::invalid_argument);
  }
}

namespace {

/// A task_result with two large returns, encoded: header, body, bulk frames 0 and 1.
std::vector<std::string> two_bulk_frames() {
  protocol::task_result r;
  r.task = task_id::random();
  protocol::object_payload a, b;
  a.ok = b.ok = true;
  a.payload = std::string(protocol::bulk::threshold, 'a');
  b.payload = std::string(protocol::bulk::threshold, 'b');
  r.returns = {a, b};
  auto frames = wire::encode(r);
  REQUIRE(frames.size() == 4);
  return frames;
}

/// Rewrites the body's reference to bulk frame `from` (msgpack fixext4 of type 1) into one
/// to frame `to`.
void retarget(std::string& body, std::uint32_t from, std::uint32_t to) {
  const std::string old{'\xd6', '\x01', '\0', '\0', '\0', static_cast<char>(from)};
  const auto at = body.find(old);
  REQUIRE(at != std::string::npos);
  body[at + 5] = static_cast<char>(to);
}

std::string header_for(const std::vector<std::string>& frames, std::uint32_t type) {
  return detail::pack(wire::header{std::string(wire::magic), protocol_version, type,
                                   frames[1].size(),
                                   static_cast<std::uint32_t>(frames.size() - 2)});
}

constexpr auto task_result_tag = static_cast<std::uint32_t>(
  protocol::message(std::in_place_type<protocol::task_result>).index());

} // namespace

TEST_CASE("a message referencing one bulk frame twice is refused", "[wire][security]") {
  auto frames = two_bulk_frames();
  REQUIRE(decode(frames).has_value());
  retarget(frames[1], 1, 0);
  frames.pop_back();  // frame 0 named twice, and only frame 0 sent
  frames[0] = header_for(frames, task_result_tag);
  auto r = decode(frames);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code() == error_code::invalid_argument);
  CHECK(r.error().message().find("more than once") != std::string::npos);
}

TEST_CASE("a bulk frame named by a million references costs one copy, then a refusal",
          "[wire][security]") {
  // task_result{task, returns: [payload x n]}: each payload an array whose third field
  // references bulk frame 0. Without the once rule this asks for n copies of the frame.
  constexpr std::uint32_t n = 1'000'000;
  msgpack::sbuffer body;
  msgpack::packer<msgpack::sbuffer> pk(body);
  pk.pack_array(3);
  pk.pack(task_id::random());
  pk.pack_array(n);
  const char ref[4] = {0, 0, 0, 0};
  for (std::uint32_t i = 0; i < n; ++i) {
    pk.pack_array(3);
    pk.pack(object_id{});
    pk.pack(true);
    pk.pack_ext(4, protocol::bulk::ext_type);
    pk.pack_ext_body(ref, 4);
  }
  pk.pack(false);
  std::vector<std::string> frames{"", std::string(body.data(), body.size()),
                                  std::string(1 << 20, 'x')};
  frames[0] = header_for(frames, task_result_tag);
  auto r = decode(frames, 64u << 20);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code() == error_code::invalid_argument);
}

TEST_CASE("a bulk frame the body never references is refused", "[wire][security]") {
  auto frames = two_bulk_frames();
  retarget(frames[1], 1, 0);
  // Frame 1 is still sent but nothing names it; frame 0 is named twice.
  frames[0] = header_for(frames, task_result_tag);
  REQUIRE(decode(frames).error().code() == error_code::invalid_argument);

  // A valid message with one extra, unnamed frame appended.
  auto padded = two_bulk_frames();
  padded.push_back(std::string(1000, 'z'));
  padded[0] = header_for(padded, task_result_tag);
  auto r = decode(padded);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code() == error_code::invalid_argument);
  CHECK(r.error().message().find("3 bulk frames announced, 2 referenced") != std::string::npos);
}

TEST_CASE("forged lengths inside a message are refused before anything is allocated for them",
          "[wire][security]") {
  const auto tag_of = [](protocol::message m) { return static_cast<std::uint32_t>(m.index()); };
  struct forged {
    const char* what;
    std::uint32_t type;
    std::string body;
  };
  const std::vector<forged> cases{
    // store_free{ids}: the ids array claims 2^32-1 elements.
    {"array", tag_of(protocol::store_free{}), std::string("\x91\xdd\xff\xff\xff\xff", 6)},
    // store_free{ids}: an array claiming 65535 elements, with 3 bytes of them present.
    {"short array", tag_of(protocol::store_free{}), std::string("\x91\xdc\xff\xff\xc0\xc0\xc0", 7)},
    // resource_reply{request_id, total, available}: a map claiming 2^32-1 pairs.
    {"map", tag_of(protocol::resource_reply{}), std::string("\x93\x01\xdf\xff\xff\xff\xff", 7)},
    // shutdown_component{reason}: a 4 GiB string, and a 4 GiB binary.
    {"str", tag_of(protocol::shutdown_component{}), std::string("\x91\xdb\xff\xff\xff\xff", 6)},
    {"bin", tag_of(protocol::shutdown_component{}), std::string("\x91\xc6\xff\xff\xff\xff", 6)},
    // store_chunk{..., data}: a 4 GiB ext.
    {"ext", tag_of(protocol::store_chunk{}),
     std::string("\x97\x01\x92\x00\x00\x00\xc3\xc9\xff\xff\xff\xff\x01", 13)},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    std::vector<std::string> frames{"", c.body};
    frames[0] = header_for(frames, c.type);
    auto r = decode(frames);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code() == error_code::invalid_argument);
  }
}
