// Both ends of a chunk, on their own: the holder's chunk_server (node/chunk_server.hpp) on the
// recording transport and a real object store, sharing an object's bytes in clear or sealing
// them, refusing what it must, and the pins of sent chunks; and the puller's
// dropped_chunk_log (node/dropped_chunk_log.hpp), which counts every dropped chunk and logs
// at most a few a second.
#include "fakes/recording_transport.hpp"
#include "log.hpp"
#include "node/chunk_seal.hpp"
#include "node/chunk_server.hpp"
#include "node/dropped_chunk_log.hpp"

#include <celer/store/checksum.hpp>
#include <celer/store/object_store.hpp>
#include <celer/store/shm_arena.hpp>

#include "captured_stderr.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>
#include <sstream>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct server_parts {
  fakes::recording_transport net;
  std::unique_ptr<store::object_store> objects = open();
  chunk_server server{net, *objects, /*lane=*/nullptr};
  job_id job = job_id::random();
  address puller{unique_id::random(), "tcp://127.0.0.1:9"};

  static std::unique_ptr<store::object_store> open() {
    auto s = store::object_store::open({.capacity = 32 << 20});
    REQUIRE(s);
    return std::move(*s);
  }
  /// A sealed, unpinned object of `size` bytes of `fill`.
  object_id put(std::size_t size, char fill) {
    const auto id = object_id::random();
    auto at = objects->create(id, size, 0, {unique_id::random(), job}, /*durable=*/false);
    REQUIRE(at);
    std::memset(at->segment->base() + at->offset, fill, size);
    REQUIRE(objects->seal(id));
    objects->unpin(id);
    return id;
  }
  protocol::store_chunk served(protocol::store_pull p) {
    server.serve(p);
    auto c = net.take<protocol::store_chunk>();
    REQUIRE(c.size() == 1);
    CHECK(c[0].first == puller);
    return std::move(c[0].second);
  }
};

} // namespace

TEST_CASE("a chunk in clear shares the object's bytes, checksummed, pinned until the transport lets go",
          "[store][chunks]") {
  server_parts s;
  const auto id = s.put(1 << 20, 'x');
  auto c = s.served({7, s.puller, id, 4096, 8192, s.job});
  REQUIRE(c.ok);
  CHECK(c.request_id == 7);
  CHECK(c.offset == 4096);
  CHECK(c.data == std::string(8192, 'x'));
  CHECK(c.checksum == store::checksum(c.data.data(), c.data.size()));
  CHECK(c.data.owner() != nullptr);  // the store's memory, not a copy
  CHECK(s.server.chunks_pinned() == 1);
  CHECK(s.objects->stats().pinned_objects == 1);

  s.server.release_sent();  // the bytes are still held: nothing to release
  CHECK(s.server.chunks_pinned() == 1);
  c = {};  // the transport lets go of the frame
  s.server.release_sent();
  CHECK(s.server.chunks_pinned() == 0);
  CHECK(s.objects->stats().pinned_objects == 0);
}

TEST_CASE("a chunk server answers a pull it cannot serve with a failed chunk and keeps no pin",
          "[store][chunks][security]") {
  server_parts s;
  const auto small = s.put(1000, 'x');
  const auto large = s.put(chunk_server::max_chunk_bytes + 1, 'y');
  struct asked {
    object_id id;
    std::uint64_t offset;
    std::uint32_t length;
    std::string key;
    error_code code;
  };
  for (const auto& a : {asked{small, 1000, 1, {}, error_code::invalid_argument},
                        asked{small, 1, 1000, {}, error_code::invalid_argument},
                        asked{small, ~std::uint64_t{0}, 2, {}, error_code::invalid_argument},
                        asked{large, 0, static_cast<std::uint32_t>(chunk_server::max_chunk_bytes + 1), {},
                              error_code::invalid_argument},
                        asked{small, 0, 1000, "short key", error_code::invalid_argument},
                        asked{object_id::random(), 0, 1, {}, error_code::not_found}}) {
    INFO(a.offset << " + " << a.length << ", key of " << a.key.size() << " bytes");
    protocol::store_pull p{7, s.puller, a.id, a.offset, a.length, s.job};
    p.key = a.key;
    const auto c = s.served(p);
    CHECK_FALSE(c.ok);
    CHECK(c.fail.code == a.code);
    CHECK(c.data.empty());
  }
  s.server.refuse({8, s.puller, small, 0, 1000, job_id::random()});
  auto refused = s.net.take<protocol::store_chunk>();
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].second.fail.code == error_code::permission_denied);
  CHECK(s.server.chunks_pinned() == 0);
  CHECK(s.objects->stats().pinned_objects == 0);
}

TEST_CASE("a sealed chunk without a lane goes on the connection and opens only under its pull's key",
          "[store][chunks][security]") {
  server_parts s;
  const auto id = s.put(5000, 'z');
  protocol::store_pull p{7, s.puller, id, 1000, 3000, s.job};
  p.key = chunk_seal::new_key();
  p.lane = "tcp://127.0.0.1:10";  // the puller's lane; this node has none
  const auto c = s.served(p);
  REQUIRE(c.ok);
  REQUIRE(c.data.size() == 3000 + chunk_seal::tag_bytes);
  std::string plain(3000, '\0');
  CHECK(chunk_seal::open(p.key, {7, id, 1000}, c.data.data(), c.data.size(), plain.data()));
  CHECK(plain == std::string(3000, 'z'));
  CHECK_FALSE(chunk_seal::open(chunk_seal::new_key(), {7, id, 1000}, c.data.data(), c.data.size(), plain.data()));
  CHECK(s.server.chunks_pinned() == 0);  // sealed into a buffer of its own: the object is free to go
  CHECK(s.objects->stats().pinned_objects == 0);
}

TEST_CASE("a chunk server forgets the connection of a dead node it sent chunks to, and only that",
          "[store][chunks]") {
  server_parts s;
  const auto id = s.put(1000, 'x');
  const address other{unique_id::random(), "tcp://127.0.0.1:11"};
  (void)s.served({7, s.puller, id, 0, 1000, s.job});
  s.server.forget(node_id(other.id));  // sent nothing there
  CHECK(s.net.forgotten.empty());
  s.server.forget(node_id(s.puller.id));
  CHECK(s.net.forgotten == std::vector<std::string>{s.puller.endpoint});
  s.server.forget(node_id(s.puller.id));  // once
  CHECK(s.net.forgotten.size() == 1);
}

namespace {

using celer_test::captured_stderr;

std::size_t lines_of(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

} // namespace

TEST_CASE("every dropped chunk is counted, at most five a second logged, and the rest summed up after",
          "[store][chunks]") {
  dropped_chunk_log dropped;
  protocol::store_chunk c;
  c.id = object_id::random();
  c.offset = 4096;
  const std::chrono::steady_clock::time_point t{std::chrono::hours(1)};
  const auto first = captured_stderr([&] {
    for (int i = 0; i < 8; ++i) dropped.drop(c, "no chunk at offset 4096 was asked for", t);
  });
  const auto next = captured_stderr([&] { dropped.drop(c, "no pull of this object", t + 1s); });
  CHECK(dropped.count() == 9);
  if (log_enabled(log_level::warn)) {
    CHECK(lines_of(first) == dropped_chunk_log::lines_per_second);
    CHECK(first.find("dropped a chunk of object " + c.id.hex() + " (offset 4096, 0 bytes): no chunk at offset") !=
          std::string::npos);
    CHECK(lines_of(next) == 2);
    CHECK(next.find("3 more chunk(s) dropped in the last second") != std::string::npos);
  }
}
