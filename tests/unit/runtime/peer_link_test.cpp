// peer_link (core/peer_link.hpp): two processes' links driven message by message over a
// recording transport; the lanes are real shared memory (a memfd this process maps twice).
#include "core/peer_link.hpp"
#include "fakes/recording_transport.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>

using namespace celer;
using namespace std::chrono_literals;

namespace {

const job_id job = job_id::random();

/// `n` bytes counting up from `first`.
std::vector<std::byte> pattern(std::size_t n, unsigned first) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((first + i) & 0xff);
  return v;
}

bool same(const bytes& got, const std::vector<std::byte>& want) {
  return got.size() == want.size() && std::memcmp(got.data(), want.data(), want.size()) == 0;
}

/// Two processes' links on one (or two) machines, each over its own recording transport.
struct pair_of_links {
  explicit pair_of_links(std::size_t ring = std::size_t{1} << 20, std::string boot_b = "boot-1")
    : a(net_a, self_a, job, {.lane_bytes = ring, .boot_id = "boot-1"}),
      b(net_b, self_b, job, {.lane_bytes = ring, .boot_id = std::move(boot_b)}) {}

  /// Delivers what `from` sent to the link it was sent to; returns the peer_data messages.
  std::vector<protocol::peer_data> deliver(fakes::recording_transport& from, peer_link& to) {
    std::vector<protocol::peer_data> out;
    for (auto& [addr, m] : from.take<protocol::peer_data>()) {
      out.push_back(m);
      to.on_data(m);
    }
    return out;
  }
  std::vector<protocol::peer_data> a_to_b() { return deliver(net_a, b); }
  std::vector<protocol::peer_data> b_to_a() { return deliver(net_b, a); }
  /// A sends once so that it asks, B grants, A maps the ring.
  void open_lane() {
    auto first = pattern(20000, 0);
    REQUIRE(a.send(self_b, "box", 1000, first));
    a_to_b();
    b_to_a();
    REQUIRE(a.counters().lanes_out == 1);
  }

  address self_a{unique_id::random(), "tcp://127.0.0.1:1"}, self_b{unique_id::random(), "tcp://127.0.0.1:2"};
  fakes::recording_transport net_a, net_b;
  peer_link a, b;
};

} // namespace

TEST_CASE("a process on the same machine gets a lane: bytes after the grant go through shared memory, "
          "received as a view that frees the ring when dropped",
          "[peer]") {
  pair_of_links p;
  const auto first = pattern(20000, 1);
  REQUIRE(p.a.send(p.self_b, "box", 0, first));
  auto sent = p.a_to_b();
  REQUIRE(sent.size() == 2);  // the ask, and the bytes themselves in the message meanwhile
  CHECK(sent[0].box == "celer.peer.lane-ask");
  CHECK(sent[1].payload.size() == first.size());
  CHECK(sent[1].lane_size == 0);
  auto grants = p.b_to_a();
  REQUIRE(grants.size() == 1);
  CHECK(grants[0].box == "celer.peer.lane-grant");
  CHECK(p.a.counters().lanes_out == 1);
  CHECK(p.b.counters().lanes_in == 1);

  const auto second = pattern(100000, 2);
  REQUIRE(p.a.send(p.self_b, "box", 1, second));
  auto notices = p.a_to_b();
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].payload.empty());  // only where the bytes are
  CHECK(notices[0].lane_size == second.size());

  auto got0 = p.b.mailbox().take("box", 0, std::nullopt);
  auto got1 = p.b.mailbox().take("box", 1, std::nullopt);
  REQUIRE(got0);
  REQUIRE(got1);
  CHECK(same(*got0, first));
  CHECK(same(*got1, second));
  const auto ca = p.a.counters(), cb = p.b.counters();
  CHECK(ca.bytes_sent_message == first.size());
  CHECK(ca.bytes_sent_shared == second.size());
  CHECK(cb.bytes_received_message == first.size());
  CHECK(cb.bytes_received_shared == second.size());
}

TEST_CASE("a full lane sends in messages, and the ring wraps once the views are dropped", "[peer]") {
  pair_of_links p(std::size_t{1} << 20);  // 1 MiB ring
  p.open_lane();
  (void)p.b.mailbox().take("box", 1000, std::nullopt);
  std::vector<bytes> held;
  for (unsigned i = 0; i < 3; ++i) {  // 3 x 300 KB: 900 KB of the ring held
    REQUIRE(p.a.send(p.self_b, "box", i, pattern(300000, i)));
    auto n = p.a_to_b();
    REQUIRE(n.size() == 1);
    CHECK(n[0].lane_size == 300000);
    held.push_back(*p.b.mailbox().take("box", i, std::nullopt));
  }
  REQUIRE(p.a.send(p.self_b, "box", 3, pattern(300000, 3)));  // no room: in the message
  auto full = p.a_to_b();
  REQUIRE(full.size() == 1);
  CHECK(full[0].lane_size == 0);
  CHECK(full[0].payload.size() == 300000);
  CHECK(same(*p.b.mailbox().take("box", 3, std::nullopt), pattern(300000, 3)));

  // Dropping the second view frees nothing yet: the ring is freed from its oldest bytes on.
  held.erase(held.begin() + 1);
  REQUIRE(p.a.send(p.self_b, "box", 4, pattern(300000, 4)));
  CHECK(p.a_to_b().at(0).lane_size == 0);
  held.erase(held.begin());  // the first and second are free now: 600 KB
  // 900,000 + 300,000 would cross the ring's end at 1,048,576: the bytes go at its start.
  REQUIRE(p.a.send(p.self_b, "box", 5, pattern(300000, 5)));
  auto wrapped = p.a_to_b();
  REQUIRE(wrapped.size() == 1);
  CHECK(wrapped[0].lane_size == 300000);
  CHECK(wrapped[0].lane_at % (std::size_t{1} << 20) == 0);
  CHECK(wrapped[0].lane_claim < wrapped[0].lane_at);
  auto got = p.b.mailbox().take("box", 5, std::nullopt);
  REQUIRE(got);
  CHECK(same(*got, pattern(300000, 5)));
  CHECK(same(held.at(0), pattern(300000, 2)));  // what is still held was not overwritten
}

TEST_CASE("small payloads, and payloads over half the ring, go in messages", "[peer]") {
  pair_of_links p(std::size_t{1} << 20);
  p.open_lane();
  REQUIRE(p.a.send(p.self_b, "box", 1, pattern(100, 0)));
  REQUIRE(p.a.send(p.self_b, "box", 2, pattern((std::size_t{1} << 19) + 1, 0)));
  auto sent = p.a_to_b();
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].lane_size == 0);
  CHECK(sent[1].lane_size == 0);
  CHECK(same(*p.b.mailbox().take("box", 2, std::nullopt), pattern((std::size_t{1} << 19) + 1, 0)));
}

TEST_CASE("a process on another machine gets no lane, and bytes keep going in messages", "[peer]") {
  pair_of_links p(std::size_t{1} << 20, "boot-2");
  for (unsigned i = 0; i < 3; ++i) REQUIRE(p.a.send(p.self_b, "box", i, pattern(50000, i)));
  auto sent = p.a_to_b();
  CHECK(sent.size() == 4);  // one ask, three messages with their bytes
  CHECK(p.b_to_a().empty());  // no grant
  CHECK(p.a.counters().lanes_out == 0);
  CHECK(p.b.counters().lanes_in == 0);
  for (unsigned i = 0; i < 3; ++i) CHECK(same(*p.b.mailbox().take("box", i, std::nullopt), pattern(50000, i)));
}

TEST_CASE("a grant whose ring does not carry its nonce is not used", "[peer]") {
  pair_of_links p;
  REQUIRE(p.a.send(p.self_b, "box", 0, pattern(20000, 0)));
  p.a_to_b();
  auto grants = p.net_b.take<protocol::peer_data>();
  REQUIRE(grants.size() == 1);
  auto forged = grants[0].second;
  // The same grant with another nonce: what a path naming someone else's file would give.
  msgpack::object_handle h = msgpack::unpack(forged.payload.data(), forged.payload.size());
  auto fields = h.get().as<std::tuple<std::string, std::uint64_t, std::string>>();
  std::get<2>(fields)[0] = static_cast<char>(std::get<2>(fields)[0] ^ 1);
  msgpack::sbuffer buf;
  msgpack::pack(buf, fields);
  forged.payload.assign(buf.data(), buf.size());
  p.a.on_data(forged);
  CHECK(p.a.counters().lanes_out == 0);
  REQUIRE(p.a.send(p.self_b, "box", 1, pattern(20000, 1)));
  CHECK(p.a_to_b().at(0).lane_size == 0);
}

TEST_CASE("a notice that does not follow the last one or leaves the ring loses only its message", "[peer]") {
  pair_of_links p(std::size_t{1} << 20);
  p.open_lane();
  REQUIRE(p.a.send(p.self_b, "box", 1, pattern(20000, 1)));
  auto n = p.net_a.take<protocol::peer_data>();
  REQUIRE(n.size() == 1);
  for (auto [claim, at, size] : {std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>{5, 5, 20000},
                                 {0, 0, std::uint64_t{1} << 21}, {0, (std::uint64_t{1} << 20) - 10, 20000},
                                 {0, std::uint64_t{1} << 40, 20000}}) {
    auto bad = n[0].second;
    bad.seq = 99;
    bad.lane_claim = claim;
    bad.lane_at = at;
    bad.lane_size = size;
    p.b.on_data(bad);
  }
  CHECK(p.b.mailbox().take("box", 99, std::chrono::steady_clock::now()).error().code() ==
        error_code::deadline_exceeded);
  p.b.on_data(n[0].second);  // the real one still fits
  CHECK(same(*p.b.mailbox().take("box", 1, std::nullopt), pattern(20000, 1)));
}

TEST_CASE("another job's processes can neither ask for a lane nor fill a mailbox", "[peer]") {
  pair_of_links p;
  REQUIRE(p.a.send(p.self_b, "box", 0, pattern(20000, 0)));
  for (auto& [to, m] : p.net_a.take<protocol::peer_data>()) {
    m.sender_job = job_id::random();
    p.b.on_data(m);
  }
  CHECK(p.net_b.take<protocol::peer_data>().empty());
  CHECK(p.b.counters().lanes_in == 0);
  CHECK(p.b.mailbox().take("box", 0, std::chrono::steady_clock::now()).error().code() ==
        error_code::deadline_exceeded);
}

TEST_CASE("a send that fails leaves the lane as it was", "[peer]") {
  pair_of_links p;
  p.open_lane();
  p.net_a.unreachable.push_back(p.self_b);
  CHECK_FALSE(p.a.send(p.self_b, "box", 1, pattern(20000, 1)));
  p.net_a.unreachable.clear();
  REQUIRE(p.a.send(p.self_b, "box", 2, pattern(20000, 2)));
  auto n = p.a_to_b();
  REQUIRE(n.size() == 1);
  CHECK(n[0].lane_size == 20000);
  CHECK(same(*p.b.mailbox().take("box", 2, std::nullopt), pattern(20000, 2)));
}
