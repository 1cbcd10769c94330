// The node agent's object store service, driven message by message: pins per process,
// transfers between nodes and their checksums, what a job's end takes back.
#include "arena_of_reply.hpp"
#include "fakes/recording_transport.hpp"
#include "node/arena_handout.hpp"
#include "node/node_store.hpp"

#include <celer/store/checksum.hpp>
#include <celer/store/object_store.hpp>
#include <celer/store/shm_arena.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <limits>
#include <memory>

using namespace celer;

namespace {

struct store_fixture {
  fakes::recording_transport net;
  address self{unique_id::random(), {}};
  address client{unique_id::random(), {}};
  job_id job = job_id::random();
  /// The store's clock: tests move it by hand.
  std::chrono::steady_clock::time_point now{};
  // 4 MiB chunks, 4 in flight: the sizes below count chunks of that size.
  node_store store{net, {node_id(self.id), self, address{unique_id::random(), {}}, 16 << 20, {},
                         true, /*pull_timeout=*/std::chrono::milliseconds(1000),
                         [this] { return now; }, /*pull_id_seed=*/0,
                         /*chunk_bytes=*/4 << 20, /*chunks_in_flight=*/4}};
  std::uint64_t next = 0;

  protocol::store_reply reply() {
    auto r = net.take<protocol::store_reply>();
    REQUIRE(r.size() == 1);
    return r.front().second;
  }
  /// Creates and seals an object of `size` bytes holding `fill`; returns where it is.
  protocol::store_reply put(const object_id& id, std::size_t size, char fill) {
    protocol::store_create c{++next, client, id, size, 0, client, job, false};
    store.on(c);
    auto made = reply();
    REQUIRE(made.ok);
    auto seg = test::arena_of(made);
    std::memset(seg.base() + made.offset, fill, size);
    protocol::store_seal s{++next, client, id};
    store.on(s);
    REQUIRE(reply().ok);
    return made;
  }
  protocol::store_reply get(const object_id& id, const address& source = {}, std::size_t size = 0) {
    protocol::store_get g{++next, client, id, source, size, 0, client, job};
    store.on(g);
    return reply();
  }
};

} // namespace

TEST_CASE("a job's end drops the pins of its processes and frees its objects", "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  f.put(id, 1 << 20, 'x');
  REQUIRE(f.get(id).ok);  // a reader maps it (and never says it is done: it died)
  protocol::store_free free_it{{id}};
  f.store.on(free_it);
  CHECK(f.store.stats().bytes_in_memory >= (1u << 20));  // still mapped by the reader
  f.store.job_finished(f.job);
  CHECK(f.store.stats().bytes_in_memory == 0);
}

TEST_CASE("a pull writes checked chunks and serves every reader that waited", "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  const std::size_t size = 6 << 20;  // two chunks
  protocol::store_get g{++f.next, f.client, id, source, size, 0, f.client, f.job};
  f.store.on(g);
  protocol::store_get g2{++f.next, address{unique_id::random(), {}}, id, source, size, 0, f.client, f.job};
  f.store.on(g2);
  auto asked = f.net.take<protocol::store_pull>();
  REQUIRE(asked.size() == 2);  // both chunks at once, for both readers
  for (auto& [to, pull] : asked) {
    CHECK(to == source);
    CHECK(pull.job == f.job);  // the node holding it checks the job it names
    protocol::store_chunk c;
    c.request_id = pull.request_id;
    c.id = id;
    c.offset = pull.offset;
    c.ok = true;
    c.data = std::string(pull.length, 'p');
    c.checksum = store::checksum(c.data.data(), c.data.size());
    f.store.on(c);
  }
  auto replies = f.net.take<protocol::store_reply>();
  REQUIRE(replies.size() == 2);
  for (auto& [to, r] : replies) {
    CHECK(r.ok);
    CHECK(r.pulled);
    CHECK(r.size == size);
  }
  CHECK(f.store.stats().pulled_objects == 1);
}

TEST_CASE("a chunk damaged in transfer fails the read and leaves no copy", "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  protocol::store_get g{++f.next, f.client, id, source, 1000, 0, f.client, f.job};
  f.store.on(g);
  auto asked = f.net.take<protocol::store_pull>();
  REQUIRE(asked.size() == 1);
  protocol::store_chunk c;
  c.request_id = asked[0].second.request_id;
  c.id = id;
  c.ok = true;
  c.data = std::string(1000, 'p');
  c.checksum = store::checksum(c.data.data(), c.data.size()) ^ 1;
  f.store.on(c);
  auto r = f.reply();
  CHECK_FALSE(r.ok);
  CHECK(r.fail.code == error_code::data_loss);
  CHECK(r.fail.message.find("checksum") != std::string::npos);
  CHECK(f.store.stats().objects_in_memory == 0);
}

TEST_CASE("a pull from a node known dead fails at once", "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  f.store.node_died(node_id(source.id));
  auto r = f.get(id, source, 100);
  CHECK_FALSE(r.ok);
  CHECK(r.fail.message.find("died") != std::string::npos);
  CHECK(f.net.take<protocol::store_pull>().empty());
}

TEST_CASE("a store_create whose size or lead overflows is refused and maps nothing",
          "[store][security]") {
  store_fixture f;
  const auto max = std::numeric_limits<std::uint64_t>::max();
  for (const auto& [size, lead] : {std::pair<std::uint64_t, std::uint32_t>{max, 0},
                                   {max - 10, 20}, {max - 63, 0}, {100, 64}, {100, 0xffffffffu}}) {
    INFO(size << " + " << lead);
    protocol::store_create c{++f.next, f.client, object_id::random(), size, lead, f.client, f.job, false};
    f.store.on(c);
    auto r = f.reply();
    CHECK_FALSE(r.ok);
    CHECK((r.fail.code == error_code::resource_exhausted ||
           r.fail.code == error_code::invalid_argument));
    CHECK(r.size == 0);
  }
  CHECK(f.store.stats().objects_in_memory == 0);
}

TEST_CASE("a store_get that would pull an object of an impossible size is refused",
          "[store][security]") {
  store_fixture f;
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  auto r = f.get(object_id::random(), source, std::numeric_limits<std::uint64_t>::max());
  CHECK_FALSE(r.ok);
  CHECK(r.fail.code == error_code::resource_exhausted);
  CHECK(f.net.take<protocol::store_pull>().empty());
  CHECK(f.store.stats().objects_in_memory == 0);
}

TEST_CASE("a store_pull past the object's end, wrapping around, or larger than a chunk is refused",
          "[store][security]") {
  store_fixture f;
  const auto id = object_id::random();
  f.put(id, 1000, 'x');
  const address peer{unique_id::random(), "tcp://127.0.0.1:2"};
  const auto max = std::numeric_limits<std::uint64_t>::max();
  for (const auto& [offset, length] : {std::pair<std::uint64_t, std::uint32_t>{max, 2},
                                       {max - 100, 200}, {1000, 1}, {1, 1000}, {0, 0xffffffffu}}) {
    INFO(offset << " + " << length);
    protocol::store_pull p{7, peer, id, offset, length};
    f.store.on(p);
    auto c = f.net.take<protocol::store_chunk>();
    REQUIRE(c.size() == 1);
    CHECK_FALSE(c[0].second.ok);
    CHECK(c[0].second.fail.code == error_code::invalid_argument);
    CHECK(c[0].second.data.empty());
  }
  protocol::store_pull whole{8, peer, id, 0, 1000};
  f.store.on(whole);
  auto c = f.net.take<protocol::store_chunk>();
  REQUIRE(c.size() == 1);
  CHECK(c[0].second.ok);
  CHECK(c[0].second.data == std::string(1000, 'x'));
}

namespace {

protocol::store_chunk chunk_for(const protocol::store_pull& asked, std::string data) {
  protocol::store_chunk c;
  c.request_id = asked.request_id;
  c.id = asked.id;
  c.offset = asked.offset;
  c.ok = true;
  c.data = std::move(data);
  c.checksum = store::checksum(c.data.data(), c.data.size());
  return c;
}

/// Maps the object a store_reply names and returns its bytes.
std::string bytes_of(const protocol::store_reply& r) {
  auto seg = test::arena_of(r);
  return std::string(reinterpret_cast<const char*>(seg.base() + r.offset), r.size);
}

} // namespace

TEST_CASE("a chunk for an object, offset or size nobody asked for is dropped, not written",
          "[store][security]") {
  store_fixture f;
  const auto id = object_id::random();
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  protocol::store_get g{++f.next, f.client, id, source, 1000, 0, f.client, f.job};
  f.store.on(g);
  auto asked = f.net.take<protocol::store_pull>();
  REQUIRE(asked.size() == 1);
  const auto& want = asked[0].second;
  CHECK(want.offset == 0);
  CHECK(want.length == 1000);
  const std::string junk(1000, 'j');

  auto other_request = chunk_for(want, junk);
  other_request.request_id ^= 1;
  auto other_object = chunk_for(want, junk);
  other_object.id = object_id::random();
  auto other_offset = chunk_for(want, junk.substr(0, 500));
  other_offset.offset = 500;
  auto wrapping = chunk_for(want, junk);
  wrapping.offset = std::numeric_limits<std::uint64_t>::max() - 10;
  auto short_chunk = chunk_for(want, junk.substr(0, 999));
  auto long_chunk = chunk_for(want, junk + junk);
  auto failing_elsewhere = chunk_for(want, "");
  failing_elsewhere.ok = false;
  failing_elsewhere.offset = 4096;
  for (auto* c : {&other_request, &other_object, &other_offset, &wrapping, &short_chunk,
                  &long_chunk, &failing_elsewhere}) {
    f.store.on(*c);
  }
  CHECK(f.store.dropped_chunks() == 7);
  CHECK(f.net.sent.empty());  // no reply, no new request: the pull still waits

  auto right = chunk_for(want, std::string(1000, 'p'));
  f.store.on(right);
  auto r = f.reply();
  REQUIRE(r.ok);
  CHECK(bytes_of(r) == std::string(1000, 'p'));  // nothing of the junk landed
  // The same chunk again, now that the pull is over, is dropped too.
  f.store.on(right);
  CHECK(f.store.dropped_chunks() == 8);
  CHECK(f.net.sent.empty());
}

TEST_CASE("pull request ids are not a counter that a forger can guess", "[store][security]") {
  store_fixture f;
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    protocol::store_get g{++f.next, f.client, object_id::random(), source, 100, 0, f.client, f.job};
    f.store.on(g);
    auto asked = f.net.take<protocol::store_pull>();
    REQUIRE(asked.size() == 1);
    ids.push_back(asked[0].second.request_id);
  }
  CHECK_FALSE((ids[1] == ids[0] + 1 && ids[2] == ids[1] + 1));
}

TEST_CASE("a pull that receives no chunk for the timeout expires, its readers told, its memory freed",
          "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  protocol::store_get g{++f.next, f.client, id, source, 6 << 20, 0, f.client, f.job};
  f.store.on(g);
  protocol::store_get g2{++f.next, address{unique_id::random(), {}}, id, source, 6 << 20, 0, f.client, f.job};
  f.store.on(g2);
  auto asked = f.net.take<protocol::store_pull>();
  REQUIRE(asked.size() == 2);
  CHECK(f.store.stats().objects_in_memory == 1);

  f.now += std::chrono::milliseconds(999);
  f.store.expire_pulls();
  CHECK(f.net.sent.empty());
  f.now += std::chrono::milliseconds(1);
  f.store.expire_pulls();
  auto replies = f.net.take<protocol::store_reply>();
  REQUIRE(replies.size() == 2);  // both readers
  for (const auto& [to, r] : replies) {
    CHECK_FALSE(r.ok);
    CHECK(r.fail.code == error_code::unavailable);
    CHECK(r.fail.kind == detail::failure_kind::object_lost);
    CHECK(r.fail.message.find("object_pull_timeout_ms") != std::string::npos);
  }
  CHECK(f.store.stats().objects_in_memory == 0);
  CHECK(f.store.stats().bytes_in_memory == 0);
  // A chunk arriving late is dropped; a new reader starts a new pull.
  auto late = chunk_for(asked[0].second, std::string(asked[0].second.length, 'p'));
  f.store.on(late);
  CHECK(f.store.dropped_chunks() == 1);
  CHECK(f.net.sent.empty());
  f.store.on(g);
  CHECK(f.net.take<protocol::store_pull>().size() == 2);
}

TEST_CASE("a stuck pull expires when the next store message arrives", "[store]") {
  store_fixture f;
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  protocol::store_get g{++f.next, f.client, object_id::random(), source, 100, 0, f.client, f.job};
  f.store.on(g);
  REQUIRE(f.net.take<protocol::store_pull>().size() == 1);
  f.now += std::chrono::seconds(5);
  protocol::store_free nothing{{object_id::random()}};
  f.store.on(nothing);
  auto r = f.reply();
  CHECK_FALSE(r.ok);
  CHECK(r.fail.code == error_code::unavailable);
}

TEST_CASE("a pull that keeps receiving chunks does not expire, however long it takes", "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  const std::size_t size = 12 << 20;  // three chunks, all asked for at once
  protocol::store_get g{++f.next, f.client, id, source, size, 0, f.client, f.job};
  f.store.on(g);
  auto asked = f.net.take<protocol::store_pull>();
  REQUIRE(asked.size() == 3);
  for (const auto& [to, want] : asked) {
    f.now += std::chrono::milliseconds(800);  // 2.4 s in all, never 1 s without a chunk
    f.store.expire_pulls();
    REQUIRE(f.net.sent.empty());
    auto c = chunk_for(want, std::string(want.length, 'p'));
    f.store.on(c);
  }
  auto r = f.reply();
  CHECK(r.ok);
  CHECK(r.size == size);
}

TEST_CASE("a reader waiting for a local writer's seal does not expire", "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  protocol::store_create c{++f.next, f.client, id, 100, 0, f.client, f.job, false};
  f.store.on(c);
  REQUIRE(f.reply().ok);
  protocol::store_get g{++f.next, address{unique_id::random(), {}}, id, {}, 100, 0, f.client, f.job};
  f.store.on(g);
  f.now += std::chrono::minutes(10);
  f.store.expire_pulls();
  CHECK(f.net.sent.empty());
  protocol::store_seal s{++f.next, f.client, id};
  f.store.on(s);
  auto replies = f.net.take<protocol::store_reply>();
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].second.ok);
  CHECK(replies[1].second.ok);
}

TEST_CASE("a job cannot free another job's objects", "[store][security]") {
  store_fixture f;
  const auto id = object_id::random();
  f.put(id, 1 << 20, 'x');
  REQUIRE(f.store.stats().bytes_in_memory >= (1u << 20));

  protocol::store_free forged{{id}, job_id::random()};
  f.store.on(forged);
  CHECK(f.store.stats().bytes_in_memory >= (1u << 20));
  CHECK(f.store.refused() == 1);
  CHECK(f.get(id).ok);  // still readable
  protocol::store_release done{id, f.client, false};
  f.store.on(done);

  protocol::store_free own{{id}, f.job};
  f.store.on(own);
  CHECK(f.store.stats().bytes_in_memory == 0);
  CHECK(f.store.refused() == 1);
}

TEST_CASE("a job cannot read or release another job's objects", "[store][security]") {
  store_fixture f;
  const auto id = object_id::random();
  f.put(id, 1 << 20, 'x');
  const job_id other = job_id::random();
  const address thief{unique_id::random(), {}};

  protocol::store_get read{++f.next, thief, id, {}, 0, 0, thief, other, other};
  f.store.on(read);
  CHECK(f.net.take<protocol::store_reply>().empty());  // no pin, no segment, no offset
  CHECK(f.store.refused() == 1);

  protocol::store_get own{++f.next, f.client, id, {}, 0, 0, f.client, f.job, f.job};
  f.store.on(own);
  REQUIRE(f.reply().ok);
  // A release in the reader's name (abandon: the writer gives the object up) is refused.
  protocol::store_release forged{id, f.client, /*abandon=*/true, other};
  f.store.on(forged);
  CHECK(f.store.refused() == 2);
  CHECK(f.get(id).ok);  // still there
  protocol::store_release done{id, f.client, false, f.job};
  f.store.on(done);
  CHECK(f.store.refused() == 2);
}

TEST_CASE("a job cannot seal another job's object while it is written", "[store][security]") {
  store_fixture f;
  const auto id = object_id::random();
  protocol::store_create c{++f.next, f.client, id, 100, 0, f.client, f.job, false};
  f.store.on(c);
  REQUIRE(f.reply().ok);

  protocol::store_seal forged{++f.next, address{unique_id::random(), {}}, id, job_id::random()};
  f.store.on(forged);
  CHECK(f.net.take<protocol::store_reply>().empty());
  CHECK(f.store.refused() == 1);
  // Not readable yet: a reader of its job waits for the writer's seal.
  protocol::store_get g{++f.next, address{unique_id::random(), {}}, id, {}, 100, 0, f.client,
                        f.job, f.job};
  f.store.on(g);
  CHECK(f.net.take<protocol::store_reply>().empty());

  protocol::store_seal own{++f.next, f.client, id, f.job};
  f.store.on(own);
  const auto replies = f.net.take<protocol::store_reply>();
  REQUIRE(replies.size() == 2);  // the writer's seal and the waiting reader
  CHECK(replies[0].second.ok);
  CHECK(replies[1].second.ok);
}

TEST_CASE("a node sends an object's chunks only to a pull for the object's job",
          "[store][security]") {
  store_fixture f;
  const auto id = object_id::random();
  f.put(id, 1000, 'x');
  const address puller{unique_id::random(), "tcp://127.0.0.1:9"};

  protocol::store_pull theirs{7, puller, id, 0, 1000, job_id::random()};
  f.store.on(theirs);
  auto chunks = f.net.take<protocol::store_chunk>();
  REQUIRE(chunks.size() == 1);
  CHECK_FALSE(chunks[0].second.ok);
  CHECK(chunks[0].second.data.empty());
  CHECK(chunks[0].second.fail.code == error_code::permission_denied);
  CHECK(f.store.refused() == 1);

  protocol::store_pull own{8, puller, id, 0, 1000, f.job};
  f.store.on(own);
  chunks = f.net.take<protocol::store_chunk>();
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0].second.ok);
  CHECK(chunks[0].second.data == std::string(1000, 'x'));
}

TEST_CASE("a sent chunk shares the store's memory and keeps its object pinned until the "
          "transport lets go of it",
          "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  f.put(id, 1 << 20, 'x');
  const address puller{unique_id::random(), "tcp://127.0.0.1:9"};
  protocol::store_pull p{7, puller, id, 4096, 8192, f.job};
  f.store.on(p);
  auto chunks = f.net.take<protocol::store_chunk>();
  REQUIRE(chunks.size() == 1);
  auto& c = chunks[0].second;
  REQUIRE(c.ok);
  CHECK(c.data == std::string(8192, 'x'));
  CHECK(c.checksum == store::checksum(c.data.data(), c.data.size()));
  CHECK(c.data.owner() != nullptr);  // borrowed from the store, not a copy
  CHECK(f.store.chunks_pinned() == 1);

  // Freed meanwhile (its owner dropped the last ref): the memory stays while the bytes are
  // still to be sent, and nothing else is written there.
  protocol::store_free free_it{{id}};
  f.store.on(free_it);
  CHECK(f.store.stats().bytes_in_memory >= (1u << 20));
  f.put(object_id::random(), 1 << 20, 'y');
  CHECK(c.data == std::string(8192, 'x'));

  // The transport lets go (ZeroMQ freed the frame): the pin goes with the next store
  // message or tick, and the freed object's memory with it.
  const auto before = f.store.stats().bytes_in_memory;
  chunks.clear();
  CHECK(f.store.chunks_pinned() == 1);
  f.store.expire_pulls();
  CHECK(f.store.chunks_pinned() == 0);
  CHECK(f.store.stats().bytes_in_memory < before);
}

TEST_CASE("a chunk that cannot be sent drops its pin", "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  f.put(id, 100000, 'x');
  const address puller{unique_id::random(), "tcp://127.0.0.1:9"};
  f.net.unreachable.push_back(puller);
  protocol::store_pull p{7, puller, id, 0, 100000, f.job};
  f.store.on(p);
  CHECK(f.net.sent.empty());
  f.store.expire_pulls();
  CHECK(f.store.chunks_pinned() == 0);
  protocol::store_free free_it{{id}};
  f.store.on(free_it);
  CHECK(f.store.stats().bytes_in_memory == 0);
}

TEST_CASE("chunks queued to a node that died are dropped with its connection, and unpin",
          "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  f.put(id, 1 << 20, 'x');
  const address puller{unique_id::random(), "tcp://127.0.0.1:9"};
  protocol::store_pull p{7, puller, id, 0, 1 << 20, f.job};
  f.store.on(p);
  REQUIRE(f.store.chunks_pinned() == 1);
  f.store.node_died(node_id(puller.id));
  REQUIRE(f.net.forgotten == std::vector<std::string>{puller.endpoint});
  f.net.sent.clear();  // what forget does to the messages queued there
  f.store.expire_pulls();
  CHECK(f.store.chunks_pinned() == 0);
  protocol::store_free free_it{{id}};
  f.store.on(free_it);
  CHECK(f.store.stats().bytes_in_memory == 0);
}

TEST_CASE("a chunk still queued when its node's store is gone stays readable", "[store]") {
  fakes::recording_transport net;
  const address self{unique_id::random(), {}};
  const address client{unique_id::random(), {}};
  const job_id job = job_id::random();
  auto s = std::make_unique<node_store>(
    net, node_store::config{node_id(self.id), self, address{unique_id::random(), {}}, 4 << 20});
  const auto id = object_id::random();
  protocol::store_create c{1, client, id, 1 << 20, 0, client, job, false};
  s->on(c);
  auto made = net.take<protocol::store_reply>();
  REQUIRE(made.size() == 1);
  REQUIRE(made[0].second.ok);
  {
    auto seg = test::arena_of(made[0].second);
    std::memset(seg.base() + made[0].second.offset, 'z', 1 << 20);
  }
  protocol::store_seal sealed{2, client, id};
  s->on(sealed);
  protocol::store_pull p{7, address{unique_id::random(), "tcp://127.0.0.1:9"}, id, 0, 1 << 20, job};
  s->on(p);
  auto chunks = net.take<protocol::store_chunk>();
  REQUIRE(chunks.size() == 1);
  s.reset();  // the node stops while ZeroMQ still holds the frame
  CHECK(chunks[0].second.data == std::string(1 << 20, 'z'));
}

TEST_CASE("a pull asks for the configured chunks, and a node serves at most max_chunk_bytes",
          "[store]") {
  fakes::recording_transport net;
  const address self{unique_id::random(), {}};
  node_store::config cfg{node_id(self.id), self, address{unique_id::random(), {}}, 64 << 20};
  cfg.chunk_bytes = std::uint64_t{1} << 40;  // clamped to max_chunk_bytes
  cfg.chunks_in_flight = 3;
  node_store s(net, cfg);
  const address client{unique_id::random(), {}};
  const job_id job = job_id::random();
  const std::uint64_t size = 5 * node_store::max_chunk_bytes;
  protocol::store_get g{1, client, object_id::random(), address{unique_id::random(), "tcp://127.0.0.1:1"},
                        size, 0, client, job};
  s.on(g);
  auto asked = net.take<protocol::store_pull>();
  REQUIRE(asked.size() == 3);
  for (std::size_t i = 0; i < asked.size(); ++i) {
    CHECK(asked[i].second.offset == i * node_store::max_chunk_bytes);
    CHECK(asked[i].second.length == node_store::max_chunk_bytes);
  }
}

TEST_CASE("a store reply names the job's arena and a ticket for its fd, never a path",
          "[store][security]") {
  store_fixture f;
  const auto id = object_id::random();
  const auto made = f.put(id, 4096, 'x');
  CHECK(made.arena != 0);
  CHECK(made.arena == f.store.objects().arena_of_job(f.job));
  CHECK(made.ticket.size() == arena_handout::ticket_bytes);
  CHECK(made.socket == f.store.handout().name());
  CHECK(made.socket.find('/') == std::string::npos);  // an abstract socket's name, no file
  // The reader's reply names the same arena; its ticket fetches the fd once.
  const auto got = f.get(id);
  REQUIRE(got.ok);
  CHECK(got.arena == made.arena);
  auto fd = fetch_arena_fd(got.socket, got.arena, got.ticket, std::chrono::seconds(5));
  REQUIRE(fd);
  auto seg = store::shm_segment::adopt(*fd, got.capacity);
  REQUIRE(seg);
  CHECK(std::string(reinterpret_cast<const char*>(seg->base() + got.offset), 4096) ==
        std::string(4096, 'x'));
  const auto again = fetch_arena_fd(got.socket, got.arena, got.ticket, std::chrono::seconds(5));
  REQUIRE_FALSE(again);
  CHECK(again.error().code() == error_code::permission_denied);
  CHECK(f.store.handout().refusals() == 1);
}

TEST_CASE("a process that has mapped its job's arena gets no ticket in its replies", "[store]") {
  store_fixture f;
  const auto id = object_id::random();
  const auto made = f.put(id, 100, 'x');
  protocol::store_get g{++f.next, f.client, id, {}, 0, 0, f.client, f.job};
  g.arena_known = made.arena;
  f.store.on(g);
  const auto got = f.reply();
  REQUIRE(got.ok);
  CHECK(got.arena == made.arena);
  CHECK(got.ticket.empty());
  CHECK(got.socket.empty());
  // Another arena known (a previous run's, say): a ticket again.
  g.request_id = ++f.next;
  g.arena_known = made.arena + 1;
  f.store.on(g);
  CHECK(f.reply().ticket.size() == arena_handout::ticket_bytes);
}

TEST_CASE("two jobs' objects on one node are in two arenas, and a job's end drops its own",
          "[store][security]") {
  store_fixture f;
  const auto mine = f.put(object_id::random(), 4096, 'k');
  const job_id other = job_id::random();
  protocol::store_create c{++f.next, f.client, object_id::random(), 4096, 0, f.client, other, false};
  f.store.on(c);
  const auto theirs = f.reply();
  REQUIRE(theirs.ok);
  CHECK(theirs.arena != mine.arena);
  CHECK(f.store.objects().stats().arenas == 2);
  f.store.job_finished(other);
  CHECK(f.store.objects().stats().arenas == 1);
  CHECK(f.store.objects().arena_of_job(other) == 0);
  CHECK(f.store.objects().arena_of_job(f.job) == mine.arena);
}
