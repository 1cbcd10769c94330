// The wire encoding: every message round-trips; every kind of bad input is refused with an
// error value (never a crash, never an allocation the input cannot justify).
#include "transport/wire.hpp"

#include <celer/version.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <memory>
#include <random>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace celer;

namespace {

constexpr std::size_t limit = 1 << 20;

/// wire::decode of frames as they travel: the message frame, then bulk frames.
expected<protocol::message> decode_wire(const std::vector<std::string>& frames,
                                        std::size_t max_body = limit) {
  std::vector<std::string_view> views(frames.begin(), frames.end());
  return wire::decode(views, max_body);
}

/// A message taken apart, for the tests that forge one part: header, body, bulk frames.
std::vector<std::string> encode(const protocol::message& m) {
  auto frames = wire::encode(m);
  auto parts = wire::split(frames[0]);
  REQUIRE(parts.has_value());
  std::vector<std::string> out{std::string(parts->header), std::string(parts->body)};
  out.insert(out.end(), frames.begin() + 1, frames.end());
  return out;
}

/// Puts parts together again (header, body, bulk frames) and decodes them.
expected<protocol::message> decode(const std::vector<std::string>& parts,
                                   std::size_t max_body = limit) {
  REQUIRE(parts.size() >= 2);
  REQUIRE(parts[0].size() < 256);
  std::vector<std::string> frames{wire::message_frame(parts[1], parts[0])};
  frames.insert(frames.end(), parts.begin() + 2, parts.end());
  return decode_wire(frames, max_body);
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
    REQUIRE(frames.size() == 1);  // one frame: one CURVE box
    auto back = decode_wire(frames);
    INFO(protocol::name_of(m));
    REQUIRE(back.has_value());
    REQUIRE(back->index() == m.index());
    REQUIRE(wire::encode(*back) == frames);  // same bytes again: nothing lost
  }
}

TEST_CASE("a message from another protocol version is refused", "[wire]") {
  auto frames = encode(protocol::shutdown_component{"x"});
  wire::header h{std::string(wire::magic), protocol_version + 1, 22, frames[1].size()};
  frames[0] = detail::pack(h);
  auto r = decode(frames);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.error().code() == error_code::failed_precondition);
}

TEST_CASE("an unknown message type is refused", "[wire]") {
  auto frames = encode(protocol::shutdown_component{"x"});
  frames[0] = detail::pack(wire::header{std::string(wire::magic), protocol_version, 9999,
                                        frames[1].size()});
  auto r = decode(frames);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.error().message().find("unknown message type") != std::string::npos);
}

TEST_CASE("a header claiming a 2 GiB body is refused before anything is read", "[wire]") {
  auto frames = encode(protocol::shutdown_component{"x"});
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
  auto frames = encode(protocol::execute_task{sample_spec()});
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
  REQUIRE_FALSE(decode({frames[0], frames[1], frames[1]}).has_value());
  auto trailing = frames;
  trailing[1] += '\x00';
  trailing[0] = detail::pack(
    wire::header{std::string(wire::magic), protocol_version, 1, trailing[1].size()});
  REQUIRE_FALSE(decode(trailing).has_value());
}

TEST_CASE("a message is one frame: body, header, the header's length", "[wire]") {
  const protocol::message m = protocol::execute_task{sample_spec()};
  const auto frames = wire::encode(m);
  REQUIRE(frames.size() == 1);
  const auto prefixed = wire::encode(m, "M0123456789abcdef");
  REQUIRE(prefixed.size() == 1);
  REQUIRE(prefixed[0] == "M0123456789abcdef" + frames[0]);  // the transport's kind and destination
  auto parts = wire::split(frames[0]);
  REQUIRE(parts.has_value());
  REQUIRE(parts->header.size() == static_cast<unsigned char>(frames[0].back()));
  auto h = wire::peek_header(frames[0]);
  REQUIRE(h.has_value());
  REQUIRE(h->type == m.index());
  REQUIRE(h->body_size == parts->body.size());

  REQUIRE(decode_wire({""}).error().code() == error_code::invalid_argument);
  // A length byte past 64, or past the frame.
  auto wrong = frames[0];
  wrong.back() = static_cast<char>(65);
  REQUIRE(decode_wire({wrong}).error().code() == error_code::invalid_argument);
  REQUIRE_FALSE(wire::peek_header(wrong).has_value());
  REQUIRE(decode_wire({std::string(1, '\x20')}).error().code() == error_code::invalid_argument);
  // A length that cuts the header short, or reads into the body.
  for (int delta : {-3, -1, 1, 3}) {
    auto off = frames[0];
    off.back() = static_cast<char>(static_cast<int>(parts->header.size()) + delta);
    REQUIRE_FALSE(decode_wire({off}).has_value());
  }
  // A frame cut anywhere.
  for (std::size_t cut = 0; cut < frames[0].size(); ++cut) {
    REQUIRE_FALSE(decode_wire({frames[0].substr(0, cut)}).has_value());
  }
  REQUIRE_FALSE(decode_wire({}).has_value());
}

TEST_CASE("generated garbage never crashes any decoder", "[wire][fuzz]") {
  std::mt19937_64 gen(20261129);  // fixed seed: the same inputs every run
  const auto valid = every_message();
  std::size_t refused = 0, accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    const auto& m = valid[static_cast<std::size_t>(round) % valid.size()];
    auto frames = encode(m);
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
  auto frames = encode(r);
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
  auto frames = encode(r);
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
  // references bulk frame 0. Without the once rule this asks for n copies of the frame (10 GB;
  // a million references would be refused sooner, by the decode budget).
  constexpr std::uint32_t n = 10'000;
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

// ---- the decode budget: what a decode may allocate is bounded by what the peer sent.

namespace {

/// msgpack for an array header of `n` elements (array32, whatever n).
std::string array32(std::uint32_t n) {
  return std::string{'\xdd', static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 8), static_cast<char>(n)};
}
std::string map32(std::uint32_t n) {
  return std::string{'\xdf', static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 8), static_cast<char>(n)};
}

/// Resident bytes of this process now.
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

/// Runs `decode` in a child process (fork: a copy of this one) and returns how far the
/// child's peak resident size rose above this process's resident size, in bytes; the
/// child's exit status says whether the decode was refused (1) or accepted (0).
struct peak_of_decode {
  std::size_t growth = 0;
  int refused = -1;
};
template <class F>
peak_of_decode measure_in_child(F decode) {
  const std::size_t before = resident_bytes();
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(decode() ? 0 : 1);
  int status = 0;
  rusage usage{};
  REQUIRE(wait4(pid, &status, 0, &usage) == pid);
  REQUIRE(WIFEXITED(status));
  const std::size_t peak = static_cast<std::size_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
  return {peak > before ? peak - before : 0, WEXITSTATUS(status)};
}

/// The fewest bytes of budget with which `body` decodes as a T (it must decode with some).
template <class T>
std::size_t budget_needed(const std::string& body) {
  std::size_t low = 0, high = std::size_t{1} << 34;
  REQUIRE(wire::bounded_unpack<T>(body, "probe", high).has_value());
  while (low + 1 < high) {
    const std::size_t mid = low + (high - low) / 2;
    (wire::bounded_unpack<T>(body, "probe", mid).has_value() ? high : low) = mid;
  }
  return high;
}

protocol::node_status busy_node(int i) {
  protocol::node_status n;
  n.node = node_id::random();
  n.addr = address{unique_id::random(), "tcp://10.0.0." + std::to_string(i % 250) + ":7000"};
  n.total = *protocol::make_request(64, 8, std::int64_t{256} << 30, {{"ssd", 2}});
  n.available = *protocol::make_request(12, 3, std::int64_t{100} << 30, {{"ssd", 1}});
  n.labels = {{"zone", "us-east-1a"}, {"rack", std::to_string(i % 40)}};
  n.queued = 3;
  n.workers = 52;
  n.store.capacity = std::uint64_t{64} << 30;
  n.store.bytes_in_memory = std::uint64_t{12} << 30;
  for (int g = 0; g < 8; ++g) {
    gpu::device d;
    d.index = g;
    d.uuid = "GPU-" + std::string(36, 'a');
    d.model = "H200";
    d.name = "NVIDIA H200";
    d.memory_bytes = std::uint64_t{141} << 30;
    n.gpus.push_back(d);
    n.gpu_free.push_back(g % 2 == 0 ? 10000 : 0);
    gpu::sample s;
    s.index = g;
    s.utilisation = 0.75;
    s.memory_used_bytes = std::uint64_t{70} << 30;
    s.temperature_c = 61;
    n.gpu_samples.push_back(s);
  }
  for (int w = 0; w < 2; ++w) {
    protocol::waiting_request r;
    r.function = "train_step";
    r.job = job_id::random();
    r.need = *protocol::make_request(1, 1, 0, {});
    r.waiting_ms = 1200;
    n.waiting.push_back(r);
  }
  return n;
}

/// A message's body, encoded as the wire sends it.
std::string body_of(const protocol::message& m) { return encode(m).at(1); }

} // namespace

TEST_CASE("real messages decode well within their budget", "[wire][security]") {
  struct sample {
    const char* what;
    std::string body;
    std::size_t needed;
  };
  std::vector<sample> samples;

  protocol::status_reply status;
  for (int i = 0; i < 1000; ++i) status.nodes.push_back(busy_node(i));
  auto body = body_of(status);
  samples.push_back({"status_reply of 1,000 nodes", body, budget_needed<protocol::status_reply>(body)});

  protocol::execute_task by_ref{sample_spec()};
  by_ref.spec.args.clear();
  for (int i = 0; i < 10000; ++i) {
    by_ref.spec.args.push_back(
      {true, object_id::random(), address{unique_id::random(), "tcp://10.0.0.7:41234"}, {}});
  }
  body = body_of(by_ref);
  samples.push_back({"a task of 10,000 by-reference arguments", body,
                     budget_needed<protocol::execute_task>(body)});

  protocol::execute_task by_value{sample_spec()};
  by_value.spec.args.clear();
  for (int i = 0; i < 10000; ++i) by_value.spec.args.push_back({false, {}, {}, detail::pack(i)});
  body = body_of(by_value);
  samples.push_back({"a task of 10,000 small arguments by value", body,
                     budget_needed<protocol::execute_task>(body)});

  protocol::store_free free_many;
  for (int i = 0; i < 100000; ++i) free_many.ids.push_back(object_id::random());
  body = body_of(free_many);
  samples.push_back({"store_free of 100,000 ids", body, budget_needed<protocol::store_free>(body)});

  protocol::task_result results;
  for (int i = 0; i < 10000; ++i) {
    protocol::object_payload p;
    p.id = object_id::random();
    p.ok = true;
    p.payload = detail::pack(i);
    results.returns.push_back(p);
  }
  body = body_of(results);
  samples.push_back({"task_result of 10,000 small values", body,
                     budget_needed<protocol::task_result>(body)});

  for (const auto& s : samples) {
    const double per_byte = static_cast<double>(s.needed) / static_cast<double>(s.body.size());
    INFO(s.what << ": " << s.body.size() << " bytes need " << s.needed << " bytes of budget ("
                << per_byte << " per byte)");
    // Room to spare counting only the per-byte part (the constant part is for small
    // messages): the same content would fit at any size up to the ceiling.
    CHECK(wire::decode_budget_per_byte * s.body.size() >= s.needed * 3 / 2);
    CHECK(s.needed < wire::decode_budget_for(s.body.size()));
  }
}

/// ThreadSanitizer's shadow memory multiplies what a process's peak grows by.
#if defined(__SANITIZE_THREAD__)
constexpr std::size_t sanitizer_slack = 4;
#else
constexpr std::size_t sanitizer_slack = 1;
#endif

TEST_CASE("a task_result of a megabyte of empty arrays is refused without allocating for them",
          "[wire][security]") {
  // returns: a million empty arrays (one byte each), each standing for an object_payload of
  // 280 bytes; without a budget the decode alone grew the process by 305 MB.
  const std::uint32_t n = 1u << 20;
  std::string body = "\x93\x92\x01\x02" + array32(n) + std::string(n, '\x90') + "\xc2";
  std::vector<std::string> frames{"", body};
  frames[0] = header_for(frames, task_result_tag);
  auto r = decode(frames, std::size_t{256} << 20);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code() == error_code::resource_exhausted);
  const auto peak = measure_in_child([&] { return decode(frames, std::size_t{256} << 20).has_value(); });
  CHECK(peak.refused == 1);
  CHECK(peak.growth < sanitizer_slack * (std::size_t{64} << 20));
}

TEST_CASE("a forged body costs no more than its budget whether it is refused or not", "[wire][security]") {
  const auto tag_of = [](protocol::message m) { return static_cast<std::uint32_t>(m.index()); };
  const std::uint32_t n = 1u << 20;
  struct forged {
    const char* what;
    std::uint32_t type;
    std::string body;
  };
  const std::vector<forged> cases{
    // status_reply{request_id, nodes, ...}: a million empty node_status.
    {"status nodes", tag_of(protocol::status_reply{}),
     "\x94\x01" + array32(n) + std::string(n, '\x90') + std::string(2, '\x00')},
    // register_node{..., labels}: half a million pairs of empty strings.
    {"labels", tag_of(protocol::register_node{}),
     "\x96\x07\x92\x01\x02\x92\x92\x01\x02\xa0\x91\x80" + map32(n / 2) +
       std::string(n, '\xa0') + "\x90"},
    // store_free{ids}: a third of a million ids of small numbers.
    {"ids", tag_of(protocol::store_free{}), "\x91" + array32(n / 3) + [&] {
       std::string s;
       for (std::uint32_t i = 0; i < n / 3; ++i) s += std::string("\x92\x00\x00", 3);
       return s;
     }()},
    // tick{unused}: a million nils where one int is expected (only msgpack's tree costs).
    {"tick", tag_of(protocol::tick{}), array32(n) + std::string(n, '\xc0')},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    std::vector<std::string> frames{"", c.body};
    frames[0] = header_for(frames, c.type);
    auto r = decode(frames, std::size_t{256} << 20);
    if (!r) CHECK(r.error().code() != error_code::internal);
    const auto peak = measure_in_child([&] { return decode(frames, std::size_t{256} << 20).has_value(); });
    CAPTURE(c.body.size(), peak.growth, peak.refused);
    CHECK(peak.growth < wire::decode_budget_for(c.body.size()) + (std::size_t{16} << 20));
  }
}

TEST_CASE("a store chunk's bytes travel as a bulk frame, read where they arrived, not copied",
          "[wire]") {
  protocol::store_chunk c;
  c.request_id = 3;
  c.id = object_id::random();
  c.ok = true;
  const std::string payload(protocol::bulk::threshold + 5, 'c');
  auto held = std::make_shared<const std::string>(payload);
  c.data = protocol::shared_bytes(held->data(), held->size(), held);
  // The sender shares the bytes with the frame it hands ZeroMQ.
  auto e = wire::encode_shared(c);
  REQUIRE(e.bulk.size() == 1);
  CHECK(e.bulk[0].data() == held->data());
  // A peer cannot tell it from a bulk value: the frames are the same bytes.
  auto frames = wire::encode(c);
  REQUIRE(frames.size() == 2);
  CHECK(frames[1] == payload);

  // The receiver lends the frame; the chunk keeps it alive instead of copying it.
  auto arrived = std::make_shared<const std::string>(frames[1]);
  const std::vector<std::string_view> views{frames[0], *arrived};
  const std::vector<std::shared_ptr<const void>> owners{arrived};
  auto m = wire::decode(views, limit, owners);
  REQUIRE(m.has_value());
  const auto& got = std::get<protocol::store_chunk>(*m).data;
  CHECK(got.data() == arrived->data());
  arrived.reset();
  CHECK(got == payload);  // still alive through the chunk

  // Without an owner, or inline below the threshold, the bytes are copied.
  auto copied = decode_wire(frames);
  REQUIRE(copied.has_value());
  CHECK(std::get<protocol::store_chunk>(*copied).data == payload);
  c.data = std::string(10, 's');
  auto small = wire::encode(c);
  CHECK(small.size() == 1);
  auto inline_back = decode_wire(small);
  REQUIRE(inline_back.has_value());
  CHECK(std::get<protocol::store_chunk>(*inline_back).data == std::string(10, 's'));
}

TEST_CASE("a store chunk whose bulk frame is missing or extra is refused", "[wire][security]") {
  protocol::store_chunk c;
  c.ok = true;
  c.data = std::string(protocol::bulk::threshold, 'c');
  auto frames = wire::encode(c);
  REQUIRE(frames.size() == 2);
  auto missing = frames;
  missing.pop_back();
  auto r = decode_wire(missing);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code() == error_code::invalid_argument);
  auto extra = frames;
  extra.push_back("more");
  r = decode_wire(extra);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code() == error_code::invalid_argument);
}
