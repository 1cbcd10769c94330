// A core's side of its node's object store, driven message by message: the test plays the
// node (answering from a shared memory segment of its own) and moves the clock by hand.
#include "config/knobs.hpp"
#include "core/request_table.hpp"
#include "core/store_client.hpp"
#include "fakes/recording_transport.hpp"
#include "node/arena_handout.hpp"

#include <celer/store/shm_arena.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

using namespace celer;

namespace {

store::shm_segment new_segment() {
  auto seg = store::shm_segment::create(1 << 20);
  REQUIRE(seg);
  return std::move(*seg);
}

struct store_fixture {
  fakes::recording_transport net;
  address self{unique_id::random(), {}};
  address node{unique_id::random(), {}};
  node_id this_node = node_id::random();
  job_id job = job_id::random();
  /// The clock, and how far it moves each time it is read (zero: it stands still).
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  std::chrono::steady_clock::duration step{};
  request_table requests{net, self, [this] { return now += step; }};
  /// Copies of this core's objects that reads pulled here.
  std::vector<protocol::object_copied> copied;
  store_client client{net, requests, {self, node, this_node, job},
                      [this](const protocol::object_copied& c) { copied.push_back(c); }};

  /// The node's memory, and how it answers each request (ok, at offset 4096 of it).
  store::shm_segment segment = new_segment();
  /// Where the node hands its arena's fd over, for the ticket in each reply that names the
  /// arena to a client that has not mapped it.
  static constexpr std::uint64_t arena = 77;
  std::unique_ptr<arena_handout> handout = start_handout();
  static std::unique_ptr<arena_handout> start_handout() {
    auto h = arena_handout::start({});
    REQUIRE(h);
    return std::move(*h);
  }
  protocol::store_reply with_ticket(protocol::store_reply r, std::uint64_t known) {
    if (r.ok && known != r.arena && r.ticket.empty()) {
      r.ticket = handout->issue(job, r.arena, segment.fd());
      r.socket = handout->name();
    }
    return r;
  }
  protocol::store_reply on_create = placed(), on_seal = placed(), on_get = placed();
  /// The node answers (false: it is silent).
  bool answers = true;
  /// Requests it left unanswered (counted last: a test that saw the count may change how
  /// the node answers, while a client's thread waits).
  std::atomic<int> ignored{0};

  store_fixture() {
    net.answer = [this](const address& to, const protocol::message& m) {
      if (!answers || !(to == node)) {
        ++ignored;
        return;
      }
      std::visit(
        [&](const auto& msg) {
          using T = std::decay_t<decltype(msg)>;
          protocol::message r;
          if constexpr (std::is_same_v<T, protocol::store_create>) {
            r = reply_to(with_ticket(on_create, msg.arena_known), msg.request_id);
          } else if constexpr (std::is_same_v<T, protocol::store_seal>) {
            r = reply_to(on_seal, msg.request_id);
          } else if constexpr (std::is_same_v<T, protocol::store_get>) {
            r = reply_to(with_ticket(on_get, msg.arena_known), msg.request_id);
          } else if constexpr (std::is_same_v<T, protocol::store_stats_query>) {
            protocol::store_stats_reply s;
            s.request_id = msg.request_id;
            s.stats.capacity = segment.capacity();
            s.stats.objects_in_memory = 2;
            r = s;
          } else {
            return;
          }
          CHECK(requests.complete(r));
        },
        m);
    };
  }
  [[nodiscard]] protocol::store_reply placed() const {
    protocol::store_reply r;
    r.ok = true;
    r.offset = 4096;
    r.size = 5;
    r.arena = arena;
    r.capacity = segment.capacity();
    return r;
  }
  /// The attached node died without a word; `next` (`next_id`) is attached and answers
  /// from now on.
  void replace_node(const address& next, const node_id& next_id) {
    node = next;
    answers = true;
    client.on_node_died(this_node);
    client.attach_node(next, next_id);
  }
  static protocol::store_reply reply_to(protocol::store_reply r, std::uint64_t id) {
    r.request_id = id;
    return r;
  }
  static protocol::store_reply refused(error_code code, std::string why) {
    protocol::store_reply r;
    r.fail = protocol::failure_info::make(detail::failure_kind::object_lost, code, std::move(why));
    return r;
  }
  protocol::object_payload store(const object_id& id, const std::string& value) {
    return client.store_value(id, value.size(), static_cast<unsigned char>(value[0]),
                              /*durable=*/true, self, job,
                              [&](char* out) { std::memcpy(out, value.data(), value.size()); });
  }
  /// A stored object of 5 bytes at `where` (this node unless given).
  [[nodiscard]] protocol::object_payload stored_at(const node_id& where, const address& addr) const {
    protocol::object_payload v;
    v.id = object_id::random();
    v.ok = true;
    v.stored = true;
    v.node = where;
    v.node_addr = addr;
    v.size = 5;
    return v;
  }
};

} // namespace

TEST_CASE("store_value asks the node for room, writes the value there and seals it",
          "[core][store_client]") {
  store_fixture f;
  const auto id = object_id::random();
  const auto v = f.store(id, "hello");
  CHECK(v.ok);
  CHECK(v.stored);
  CHECK(v.id == id);
  CHECK(v.node == f.this_node);
  CHECK(v.node_addr == f.node);
  CHECK(v.size == 5);
  CHECK(std::memcmp(f.segment.base() + 4096, "hello", 5) == 0);

  const auto created = f.net.take<protocol::store_create>();
  REQUIRE(created.size() == 1);
  CHECK(created[0].first == f.node);
  CHECK(created[0].second.id == id);
  CHECK(created[0].second.size == 5);
  CHECK(created[0].second.owner == f.self);
  CHECK(created[0].second.job == f.job);
  CHECK(created[0].second.durable);
  CHECK(created[0].second.reply_to == f.self);
  const auto sealed = f.net.take<protocol::store_seal>();
  REQUIRE(sealed.size() == 1);
  CHECK(sealed[0].second.id == id);
  CHECK(sealed[0].second.request_id != created[0].second.request_id);
  CHECK(f.requests.pending() == 0);
}

TEST_CASE("a store the node refuses is returned as a failed payload, and nothing is written",
          "[core][store_client]") {
  store_fixture f;
  f.on_create = store_fixture::refused(error_code::resource_exhausted, "the store is full");
  bool wrote = false;
  const auto v = f.client.store_value(object_id::random(), 5, 'x', false, f.self, f.job,
                                      [&](char*) { wrote = true; });
  CHECK_FALSE(v.ok);
  CHECK(v.fail.code == error_code::resource_exhausted);
  CHECK(v.fail.message == "the store is full");
  CHECK_FALSE(wrote);
  CHECK(f.net.take<protocol::store_seal>().empty());

  // Refused at the seal (a durable write that failed): failed too.
  f.on_create = f.placed();
  f.on_seal = store_fixture::refused(error_code::data_loss, "the disk is gone");
  const auto sealed = f.store(object_id::random(), "hello");
  CHECK_FALSE(sealed.ok);
  CHECK(sealed.fail.code == error_code::data_loss);
}

TEST_CASE("a write that throws gives the object up at the node and rethrows",
          "[core][store_client]") {
  store_fixture f;
  const auto id = object_id::random();
  CHECK_THROWS_AS(f.client.store_value(id, 5, 'x', false, f.self, f.job,
                                       [](char*) { throw std::runtime_error("pack failed"); }),
                  std::runtime_error);
  const auto released = f.net.take<protocol::store_release>();
  REQUIRE(released.size() == 1);
  CHECK(released[0].first == f.node);
  CHECK(released[0].second.id == id);
  CHECK(released[0].second.client == f.self);
  CHECK(released[0].second.abandon);
  CHECK(f.net.take<protocol::store_seal>().empty());
}

TEST_CASE("a stored object is mapped from the node's memory and its pin dropped with the bytes",
          "[core][store_client]") {
  store_fixture f;
  std::memcpy(f.segment.base() + 4096, "hello", 5);
  const auto v = f.stored_at(f.this_node, f.node);
  auto got = f.client.map_stored(v, f.self);
  REQUIRE(got.ok);
  CHECK(got.bytes() == "hello");

  const auto asked = f.net.take<protocol::store_get>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first == f.node);
  CHECK(asked[0].second.id == v.id);
  CHECK(asked[0].second.source.nil());  // here already: nothing to pull
  CHECK(asked[0].second.owner == f.self);
  CHECK(asked[0].second.job == f.job);

  auto copy = got.keep;
  got = {};
  CHECK(f.net.take<protocol::store_release>().empty());  // still in use
  copy.reset();
  const auto released = f.net.take<protocol::store_release>();
  REQUIRE(released.size() == 1);
  CHECK(released[0].first == f.node);
  CHECK(released[0].second.id == v.id);
  CHECK(released[0].second.client == f.self);
  CHECK_FALSE(released[0].second.abandon);
}

TEST_CASE("bytes dropped after the client stops do not reach the node", "[core][store_client]") {
  store_fixture f;
  auto got = f.client.map_stored(f.stored_at(f.this_node, f.node), f.self);
  REQUIRE(got.ok);
  f.client.stop();
  got = {};
  CHECK(f.net.take<protocol::store_release>().empty());
}

TEST_CASE("an object elsewhere is pulled here, and its owner learns of the new copy",
          "[core][store_client]") {
  store_fixture f;
  const address elsewhere{unique_id::random(), "tcp://10.0.0.2:7000"};
  const address other_owner{unique_id::random(), {}};
  f.on_get.pulled = true;

  // Owned here: the core is told directly.
  const auto mine = f.stored_at(node_id::random(), elsewhere);
  REQUIRE(f.client.map_stored(mine, f.self).ok);
  const auto asked = f.net.take<protocol::store_get>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].second.source == elsewhere);
  REQUIRE(f.copied.size() == 1);
  CHECK(f.copied[0].id == mine.id);
  CHECK(f.copied[0].node == f.this_node);
  CHECK(f.copied[0].node_addr == f.node);

  // Owned by another core: the news goes to it.
  const auto theirs = f.stored_at(node_id::random(), elsewhere);
  REQUIRE(f.client.map_stored(theirs, other_owner).ok);
  CHECK(f.copied.size() == 1);
  const auto told = f.net.take<protocol::object_copied>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == other_owner);
  CHECK(told[0].second.id == theirs.id);
}

TEST_CASE("reads asked at once are answered in any order", "[core][store_client]") {
  store_fixture f;
  f.answers = false;
  const auto a = f.stored_at(f.this_node, f.node);
  const auto b = f.stored_at(f.this_node, f.node);
  auto pa = f.client.start_map(a, f.self);
  auto pb = f.client.start_map(b, f.self);
  CHECK(pa.request != pb.request);
  CHECK(f.requests.pending() == 2);
  auto rb = store_fixture::reply_to(f.with_ticket(f.placed(), /*known=*/0), pb.request);
  auto ra = store_fixture::refused(error_code::not_found, "object gone");
  ra.request_id = pa.request;
  protocol::message mb = rb, ma = ra;
  CHECK(f.requests.complete(mb));
  CHECK(f.requests.complete(ma));
  CHECK(f.client.finish_map(pb).ok);
  const auto fa = f.client.finish_map(pa);
  CHECK_FALSE(fa.ok);
  CHECK(fa.fail.code == error_code::not_found);
  CHECK(fa.fail.message == "object gone");
}

TEST_CASE("a read the node does not answer in time, or cannot be sent, fails as object_lost",
          "[core][store_client]") {
  store_fixture f;
  f.answers = false;
  f.step = std::chrono::milliseconds(knobs().request_timeout_ms);
  const auto v = f.stored_at(f.this_node, f.node);
  const auto late = f.client.map_stored(v, f.self);
  CHECK_FALSE(late.ok);
  CHECK(late.fail.kind == detail::failure_kind::object_lost);
  CHECK(late.fail.code == error_code::deadline_exceeded);
  CHECK_THAT(late.fail.message, Catch::Contains("could not be read from the object store"));
  CHECK(f.requests.pending() == 0);

  f.net.unreachable.push_back(f.node);
  const auto unsent = f.client.map_stored(v, f.self);
  CHECK_FALSE(unsent.ok);
  CHECK(unsent.fail.code == error_code::unavailable);
}

TEST_CASE("the store client asks its node for the store's numbers, and follows a new node",
          "[core][store_client]") {
  store_fixture f;
  const auto stats = f.client.query_stats();
  CHECK(stats.capacity == f.segment.capacity());
  CHECK(stats.objects_in_memory == 2);

  const address next{unique_id::random(), {}};
  const auto next_id = node_id::random();
  f.client.attach_node(next, next_id);
  f.node = next;  // the test plays the new node from here on
  f.net.sent.clear();
  const auto v = f.store(object_id::random(), "hello");
  REQUIRE(v.ok);
  CHECK(v.node == next_id);
  CHECK(v.node_addr == next);
  const auto created = f.net.take<protocol::store_create>();
  REQUIRE(created.size() == 1);
  CHECK(created[0].first == next);
}

TEST_CASE("a write whose node dies before it answers starts again through the next node attached",
          "[core][store_client]") {
  store_fixture f;
  f.answers = false;  // the node died without a word
  protocol::object_payload v;
  std::thread writer([&] { v = f.store(object_id::random(), "hello"); });
  while (f.ignored.load() == 0) std::this_thread::yield();
  // The writer waits for the dead node; the test plays the next node from here on.
  const address next{unique_id::random(), {}};
  const auto next_id = node_id::random();
  f.replace_node(next, next_id);
  writer.join();
  REQUIRE(v.ok);
  CHECK(v.node == next_id);
  CHECK(v.node_addr == next);
  const auto created = f.net.take<protocol::store_create>();
  REQUIRE(created.size() == 2);
  CHECK(created[1].first == next);
  CHECK(f.requests.pending() == 0);
}

TEST_CASE("a write started again on a store that kept the earlier try's copy replaces that copy",
          "[core][store_client]") {
  // The first node took the write and died before answering; the next one (its store
  // recovered from the same disk) holds the durable copy already.
  store_fixture f;
  f.answers = false;
  const auto id = object_id::random();
  protocol::object_payload v;
  std::thread writer([&] { v = f.store(id, "hello"); });
  while (f.ignored.load() == 0) std::this_thread::yield();
  const address next{unique_id::random(), {}};
  const auto next_id = node_id::random();
  int creates_at_next = 0;
  const auto plain = f.net.answer;
  f.net.answer = [&](const address& to, const protocol::message& m) {
    if (const auto* c = std::get_if<protocol::store_create>(&m); c != nullptr && to == next && creates_at_next++ == 0) {
      protocol::message r = store_fixture::reply_to(
        store_fixture::refused(error_code::already_exists, "object is already in the store"), c->request_id);
      CHECK(f.requests.complete(r));
      return;
    }
    plain(to, m);
  };
  f.replace_node(next, next_id);
  writer.join();
  REQUIRE(v.ok);
  CHECK(v.node == next_id);
  CHECK(creates_at_next == 2);
  const auto released = f.net.take<protocol::store_release>();
  REQUIRE(released.size() == 1);
  CHECK(released[0].first == next);
  CHECK(released[0].second.id == id);
  CHECK(released[0].second.abandon);
  CHECK(f.net.take<protocol::store_seal>().size() == 1);

  // A first try is never taken for a copy of its own: already_exists fails the write.
  f.on_create = store_fixture::refused(error_code::already_exists, "object is already in the store");
  const auto refused = f.store(object_id::random(), "again");
  CHECK_FALSE(refused.ok);
  CHECK(refused.fail.code == error_code::already_exists);
  CHECK(f.net.take<protocol::store_release>().empty());
}

TEST_CASE("a read through a node that dies goes through the next one, unless the object was "
          "stored on the dead node",
          "[core][store_client]") {
  store_fixture f;
  f.answers = false;
  const node_id elsewhere = node_id::random();
  const address elsewhere_at{unique_id::random(), "tcp://10.0.0.2:7000"};
  const auto v = f.stored_at(elsewhere, elsewhere_at);
  const auto on_dead = f.stored_at(f.this_node, f.node);
  detail::fetched got, lost;
  std::thread reader([&] {
    auto a = f.client.start_map(v, f.self);
    auto b = f.client.start_map(on_dead, f.self);
    got = f.client.finish_map(a);
    lost = f.client.finish_map(b);
  });
  while (f.ignored.load() < 2) std::this_thread::yield();
  const address next{unique_id::random(), {}};
  f.replace_node(next, node_id::random());
  reader.join();
  CHECK(got.ok);
  CHECK_FALSE(lost.ok);
  CHECK(lost.fail.code == error_code::unavailable);
  CHECK_THAT(lost.fail.message, Catch::Contains("node " + f.this_node.short_hex() + " died"));
  const auto asked = f.net.take<protocol::store_get>();
  REQUIRE(asked.size() == 3);  // both through the dead node, then one through the next
  CHECK(asked[2].first == next);
  CHECK(asked[2].second.source == elsewhere_at);
}

TEST_CASE("a process fetches its job's arena once: later replies carry no ticket and map "
          "nothing anew",
          "[core][store_client][security]") {
  store_fixture f;
  REQUIRE(f.store(object_id::random(), "hello").ok);
  CHECK(f.handout->grants() == 1);
  REQUIRE(f.store(object_id::random(), "again").ok);
  std::memcpy(f.segment.base() + 4096, "hello", 5);
  auto got = f.client.map_stored(f.stored_at(f.this_node, f.node), f.self);
  REQUIRE(got.ok);
  CHECK(got.bytes() == "hello");
  CHECK(f.handout->grants() == 1);  // one fd for the arena, whoever asks after
  const auto created = f.net.take<protocol::store_create>();
  REQUIRE(created.size() == 2);
  CHECK(created[0].second.arena_known == 0);
  CHECK(created[1].second.arena_known == store_fixture::arena);
  const auto asked = f.net.take<protocol::store_get>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].second.arena_known == store_fixture::arena);
}

TEST_CASE("a ticket the node refuses fails the read as permission_denied and drops the pin",
          "[core][store_client][security]") {
  store_fixture f;
  f.on_get.ticket = std::string(arena_handout::ticket_bytes, 'F');  // forged
  f.on_get.socket = f.handout->name();
  f.on_get.arena = store_fixture::arena + 1;  // an arena the fixture gives no ticket for
  const auto v = f.stored_at(f.this_node, f.node);
  auto got = f.client.map_stored(v, f.self);
  REQUIRE_FALSE(got.ok);
  CHECK(got.fail.code == error_code::permission_denied);
  CHECK(f.handout->refusals() == 1);
  const auto released = f.net.take<protocol::store_release>();
  REQUIRE(released.size() == 1);
  CHECK(released[0].second.id == v.id);
}
