// Pulled chunks sealed outside CURVE: the seal (node/chunk_seal), the lane's sockets
// (transport/bulk_lane, real ZeroMQ on loopback), and a pull between two node stores whose
// chunks go sealed on the lane while junk and forgeries are dropped.
#include "arena_of_reply.hpp"
#include "fakes/recording_transport.hpp"
#include "node/chunk_seal.hpp"
#include "node/node_store.hpp"
#include "transport/bulk_lane.hpp"

#include <celer/store/shm_arena.hpp>

#include <zmq.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

using namespace celer;
using namespace std::chrono_literals;

namespace {

/// What a lane delivered, for the test's thread to wait for.
struct inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<protocol::store_chunk> chunks;
  bulk_lane::deliver_fn deliver() {
    return [this](protocol::store_chunk&& c) {
      {
        std::lock_guard lock(mutex);
        chunks.push_back(std::move(c));
      }
      cv.notify_all();
    };
  }
  /// The next chunk, within 10 s (none: REQUIRE fails).
  protocol::store_chunk next() {
    std::unique_lock lock(mutex);
    REQUIRE(cv.wait_for(lock, 10s, [&] { return !chunks.empty(); }));
    auto c = std::move(chunks.front());
    chunks.pop_front();
    return c;
  }
};

std::unique_ptr<bulk_lane> open_lane(inbox& in) {
  auto lane = bulk_lane::open("tcp://127.0.0.1", node_store::max_chunk_bytes + 64, in.deliver());
  REQUIRE(lane);
  return std::move(*lane);
}

protocol::store_chunk chunk_of(std::string bytes, std::uint64_t offset = 0) {
  protocol::store_chunk c;
  c.request_id = 42;
  c.id = object_id::random();
  c.offset = offset;
  c.ok = true;
  c.data = std::move(bytes);
  return c;
}

/// Sends `c` from `from` to `to` until the lane takes it (its connection is made in the
/// background, and nothing queues before: ZMQ_IMMEDIATE), within 10 s.
void send_when_connected(bulk_lane& from, const bulk_lane& to, const protocol::store_chunk& c) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!from.send(to.endpoint(), c)) {
    REQUIRE(std::chrono::steady_clock::now() < until);
    std::this_thread::yield();
  }
}

} // namespace

TEST_CASE("a sealed chunk opens only under its key, at its place, undamaged", "[store][security]") {
  const std::string key = chunk_seal::new_key();
  REQUIRE(key.size() == chunk_seal::key_bytes);
  CHECK(chunk_seal::new_key() != key);
  const chunk_seal::place at{7, object_id::random(), 8 << 20};
  std::string plain(100000, '\0');
  for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<char>(i * 31 + 7);
  std::string sealed(plain.size() + chunk_seal::tag_bytes, '\0');
  REQUIRE(chunk_seal::seal(key, at, plain.data(), plain.size(), sealed.data()));
  CHECK(sealed.substr(0, plain.size()) != plain);  // not in clear

  std::string out(plain.size(), '\0');
  REQUIRE(chunk_seal::open(key, at, sealed.data(), sealed.size(), out.data()));
  CHECK(out == plain);

  SECTION("a flipped bit anywhere, the tag's too, fails") {
    for (std::size_t i : {std::size_t{0}, plain.size() / 2, sealed.size() - 1}) {
      std::string bad = sealed;
      bad[i] = static_cast<char>(bad[i] ^ 1);
      CHECK_FALSE(chunk_seal::open(key, at, bad.data(), bad.size(), out.data()));
    }
  }
  SECTION("another key, pull, object or offset fails") {
    CHECK_FALSE(chunk_seal::open(chunk_seal::new_key(), at, sealed.data(), sealed.size(), out.data()));
    CHECK_FALSE(chunk_seal::open(key, {8, at.id, at.offset}, sealed.data(), sealed.size(), out.data()));
    CHECK_FALSE(chunk_seal::open(key, {at.request_id, object_id::random(), at.offset}, sealed.data(),
                                 sealed.size(), out.data()));
    CHECK_FALSE(chunk_seal::open(key, {at.request_id, at.id, 0}, sealed.data(), sealed.size(), out.data()));
  }
  SECTION("cut short, or a key of another size, fails") {
    CHECK_FALSE(chunk_seal::open(key, at, sealed.data(), sealed.size() - 1, out.data()));
    CHECK_FALSE(chunk_seal::open(key, at, sealed.data(), chunk_seal::tag_bytes - 1, out.data()));
    CHECK_FALSE(chunk_seal::seal(key.substr(1), at, plain.data(), plain.size(), sealed.data()));
    CHECK_FALSE(chunk_seal::open(key.substr(1), at, sealed.data(), sealed.size(), out.data()));
  }
}

TEST_CASE("the bulk lane carries a chunk's header and bytes, and drops what is no chunk",
          "[transport][store]") {
  inbox a_in, b_in;
  auto a = open_lane(a_in);
  auto b = open_lane(b_in);
  CHECK(a->endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  CHECK(a->endpoint() != b->endpoint());

  auto c = chunk_of(std::string(3 << 20, 'z'), 5 << 20);
  send_when_connected(*a, *b, c);
  auto got = b_in.next();
  CHECK(got.request_id == c.request_id);
  CHECK(got.id == c.id);
  CHECK(got.offset == c.offset);
  CHECK(got.ok);
  CHECK(got.data.view() == c.data.view());

  // Junk from a peer with no keys at all (the lane asks for none): a frame alone, a short
  // header, three frames, a payload over the limit. Each is dropped; the lane serves on.
  zmq::context_t ctx;
  zmq::socket_t junk(ctx, zmq::socket_type::dealer);
  junk.connect(b->endpoint());
  junk.send(zmq::str_buffer("x"), zmq::send_flags::none);
  junk.send(zmq::str_buffer("Lshort"), zmq::send_flags::sndmore);
  junk.send(zmq::str_buffer("bytes"), zmq::send_flags::none);
  std::string header(33, '\0');
  header[0] = 'L';
  junk.send(zmq::buffer(header), zmq::send_flags::sndmore);
  junk.send(zmq::str_buffer("a"), zmq::send_flags::sndmore);
  junk.send(zmq::str_buffer("b"), zmq::send_flags::none);
  junk.send(zmq::buffer(header), zmq::send_flags::sndmore);
  junk.send(zmq::str_buffer("ok"), zmq::send_flags::none);  // well formed: delivered (the store judges it)
  auto passed = b_in.next();
  CHECK(passed.data.view() == "ok");
  CHECK(passed.request_id == 0);
  const auto before = b->stats();
  CHECK(before.malformed == 3);
  CHECK(before.received == 2);
  std::string huge(node_store::max_chunk_bytes + 65, 'h');
  junk.send(zmq::buffer(header), zmq::send_flags::sndmore);
  junk.send(zmq::buffer(huge), zmq::send_flags::none);  // over ZMQ_MAXMSGSIZE: the connection is closed
  junk.close();

  auto again = chunk_of("after the junk", 0);
  again.data = protocol::shared_bytes(std::string(5000, 'y'));
  send_when_connected(*a, *b, again);
  CHECK(b_in.next().data.view() == again.data.view());
  CHECK(b->stats().received == 3);
  CHECK(a->stats().sent == 2);

  // Not a tcp endpoint, or bytes no one owns: refused, nothing queued.
  CHECK_FALSE(a->send("ipc:///tmp/x", c));
  CHECK_FALSE(a->send(b->endpoint(), chunk_of(std::string(node_store::max_chunk_bytes + 65, 'o'))));
  a->stop();
  CHECK_FALSE(a->send(b->endpoint(), c));
  a->stop();  // again: nothing
}

namespace {

/// Two node stores, each with its lane: `holder` has the object, `puller` pulls it.
struct two_nodes {
  inbox holder_in, puller_in;
  std::unique_ptr<bulk_lane> holder_lane = open_lane(holder_in);
  std::unique_ptr<bulk_lane> puller_lane = open_lane(puller_in);
  fakes::recording_transport holder_net, puller_net;
  address holder_addr{unique_id::random(), "tcp://127.0.0.1:1"};
  address puller_addr{unique_id::random(), "tcp://127.0.0.1:2"};
  address client{unique_id::random(), {}};
  job_id job = job_id::random();
  node_store holder = make(holder_net, holder_addr, holder_lane.get());
  node_store puller = make(puller_net, puller_addr, puller_lane.get());

  static node_store make(fakes::recording_transport& net, const address& self, bulk_lane* lane) {
    node_store::config cfg{node_id(self.id), self, address{unique_id::random(), {}}, 64 << 20, {}, true};
    cfg.chunk_bytes = 4 << 20;
    cfg.chunks_in_flight = 4;
    cfg.lane = lane;
    return node_store(net, cfg);
  }
  /// An object of `size` bytes in the holder's store, byte i being i * 131 (mod 256).
  object_id put(std::size_t size) {
    const auto id = object_id::random();
    protocol::store_create c{1, client, id, size, 0, client, job, false};
    holder.on(c);
    auto made = holder_net.take<protocol::store_reply>();
    REQUIRE(made.size() == 1);
    auto seg = test::arena_of(made[0].second);
    for (std::size_t i = 0; i < size; ++i) seg.base()[made[0].second.offset + i] = static_cast<std::byte>(i * 131);
    protocol::store_seal s{2, client, id};
    holder.on(s);
    REQUIRE(holder_net.take<protocol::store_reply>().size() == 1);
    return id;
  }
};

} // namespace

TEST_CASE("a pull's chunks come sealed under its own key, on the puller's lane, and "
          "forgeries are dropped without failing it",
          "[store][security]") {
  two_nodes n;
  const std::size_t size = 10 << 20;  // chunks of 4, 4 and 2 MiB
  const auto id = n.put(size);
  // Connected first, so that every chunk below goes on the lane (before, they go sealed on
  // the nodes' connection: tested further down).
  send_when_connected(*n.holder_lane, *n.puller_lane, chunk_of("hello"));
  REQUIRE(n.puller_in.next().data.view() == "hello");

  protocol::store_get g{3, n.client, id, n.holder_addr, size, 0, n.client, n.job};
  n.puller.on(g);
  auto asked = n.puller_net.take<protocol::store_pull>();
  REQUIRE(asked.size() == 3);
  const std::string key = asked[0].second.key;
  CHECK(key.size() == chunk_seal::key_bytes);
  for (const auto& [to, q] : asked) {
    CHECK(to == n.holder_addr);
    CHECK(q.key == key);  // one key per pull
    CHECK(q.lane == n.puller_lane->endpoint());
  }

  // A forger who saw a chunk's header (on the wire, in clear) sends its own bytes for it.
  protocol::store_chunk forged;
  forged.request_id = asked[0].second.request_id;
  forged.id = id;
  forged.offset = asked[0].second.offset;
  forged.ok = true;
  forged.data = std::string(asked[0].second.length + chunk_seal::tag_bytes, 'f');
  n.puller.on(forged);
  CHECK(n.puller.dropped_chunks() == 1);
  // A chunk in clear, of the size asked, is dropped too: this pull takes sealed chunks only.
  forged.data = std::string(asked[0].second.length, 'f');
  n.puller.on(forged);
  CHECK(n.puller.dropped_chunks() == 2);

  for (auto& [to, q] : asked) n.holder.on(q);
  CHECK(n.holder_net.take<protocol::store_chunk>().empty());  // all went on the lane
  std::vector<protocol::store_chunk> arrived;
  for (int i = 0; i < 3; ++i) arrived.push_back(n.puller_in.next());
  for (const auto& c : arrived) {  // not in clear on the lane
    std::size_t same_bytes = 0;
    for (std::size_t i = 0; i < 4096; ++i) {
      same_bytes += static_cast<std::uint8_t>(c.data.data()[i]) == static_cast<std::uint8_t>((c.offset + i) * 131);
    }
    CHECK(same_bytes < 100);
  }
  // The second chunk's bytes moved to the first's place do not authenticate.
  protocol::store_chunk moved = arrived[1];
  moved.offset = arrived[0].offset;
  moved.data = protocol::shared_bytes(std::string(arrived[1].data.view().substr(0, asked[0].second.length + chunk_seal::tag_bytes)));
  n.puller.on(moved);
  CHECK(n.puller.dropped_chunks() == 3);
  for (auto& c : arrived) n.puller.on(c);
  auto replies = n.puller_net.take<protocol::store_reply>();
  REQUIRE(replies.size() == 1);
  REQUIRE(replies[0].second.ok);
  auto seg = test::arena_of(replies[0].second);
  bool same = true;
  for (std::size_t i = 0; i < size && same; ++i) {
    same = seg.base()[replies[0].second.offset + i] == static_cast<std::byte>(i * 131);
  }
  CHECK(same);
  CHECK(n.puller.stats().pulled_objects == 1);
}

TEST_CASE("a sealed chunk the lane cannot take goes sealed on the nodes' connection",
          "[store][security]") {
  two_nodes n;
  const auto id = n.put(1000);
  protocol::store_get g{3, n.client, id, n.holder_addr, 1000, 0, n.client, n.job};
  n.puller.on(g);
  auto asked = n.puller_net.take<protocol::store_pull>();
  REQUIRE(asked.size() == 1);
  asked[0].second.lane = "tcp://127.0.0.1:1";  // nothing listens there: not connected
  n.holder.on(asked[0].second);
  auto sent = n.holder_net.take<protocol::store_chunk>();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first == n.puller_addr);
  CHECK(sent[0].second.ok);
  CHECK(sent[0].second.data.size() == 1000 + chunk_seal::tag_bytes);
  n.puller.on(sent[0].second);
  auto replies = n.puller_net.take<protocol::store_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].second.ok);

  SECTION("a pull whose key has another size is refused") {
    protocol::store_pull q = asked[0].second;
    q.key = "short";
    n.holder.on(q);
    auto refused = n.holder_net.take<protocol::store_chunk>();
    REQUIRE(refused.size() == 1);
    CHECK_FALSE(refused[0].second.ok);
    CHECK(refused[0].second.fail.code == error_code::invalid_argument);
  }
}
