// The node agent's object store service, driven message by message: pins per process,
// transfers between nodes and their checksums, what a job's end takes back.
#include "fakes/recording_transport.hpp"
#include "node/node_store.hpp"

#include "checksum.hpp"
#include "shm_arena.hpp"

#include <catch2/catch.hpp>

#include <cstring>

using namespace celer;

namespace {

struct store_fixture {
  fakes::recording_transport net;
  address self{unique_id::random(), {}};
  address client{unique_id::random(), {}};
  job_id job = job_id::random();
  node_store store{net, {node_id(self.id), self, address{unique_id::random(), {}}, 16 << 20, {}, true}};
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
    auto seg = store::shm_segment::open(made.segment, made.capacity);
    REQUIRE(seg);
    std::memset(seg->base() + made.offset, fill, size);
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
