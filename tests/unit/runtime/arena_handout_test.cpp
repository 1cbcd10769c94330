// The node's socket that hands a job's arena fd to the process presenting a ticket for it.
#include "node/arena_handout.hpp"

#include <celer/store/shm_arena.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <string>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

using namespace celer;

namespace {

struct handout_fixture {
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  std::unique_ptr<arena_handout> handout = start();
  store::shm_segment arena = make_arena();
  unique_id job = unique_id::random();

  std::unique_ptr<arena_handout> start() {
    auto h = arena_handout::start({.ttl = std::chrono::milliseconds(1000),
                                   .read_deadline = std::chrono::milliseconds(200),
                                   .clock = [this] { return now; }});
    REQUIRE(h);
    return std::move(*h);
  }
  static store::shm_segment make_arena() {
    auto s = store::shm_segment::create(1 << 20);
    REQUIRE(s);
    std::memcpy(s->base() + 64, "job's bytes", 12);
    return std::move(*s);
  }
  expected<int> present(std::uint64_t arena_id, const std::string& ticket) {
    return fetch_arena_fd(handout->name(), arena_id, ticket, std::chrono::seconds(5));
  }
};

} // namespace

TEST_CASE("a ticket fetches its arena's fd once; the same ticket again is refused",
          "[store][security]") {
  handout_fixture f;
  const auto ticket = f.handout->issue(f.job, 7, f.arena.fd());
  REQUIRE(ticket.size() == arena_handout::ticket_bytes);
  CHECK(f.handout->outstanding() == 1);
  auto fd = f.present(7, ticket);
  REQUIRE(fd);
  auto seg = store::shm_segment::adopt(*fd, f.arena.capacity());
  REQUIRE(seg);
  CHECK(std::memcmp(seg->base() + 64, "job's bytes", 12) == 0);
  CHECK(f.handout->grants() == 1);
  CHECK(f.handout->outstanding() == 0);

  const auto again = f.present(7, ticket);
  REQUIRE_FALSE(again);
  CHECK(again.error().code() == error_code::permission_denied);
  CHECK(again.error().message().find("unknown") != std::string::npos);
  CHECK(f.handout->refusals() == 1);
}

TEST_CASE("a forged ticket, one for another arena, and an expired one are refused with no fd",
          "[store][security]") {
  handout_fixture f;
  // Forged: random bytes of the right length, and a ticket of the wrong length.
  CHECK(f.present(7, std::string(arena_handout::ticket_bytes, 'A')).error().code() ==
        error_code::permission_denied);
  CHECK_FALSE(f.present(7, "short"));
  // Presented for another arena: refused, and spent (its arena cannot be had with it later).
  const auto ticket = f.handout->issue(f.job, 7, f.arena.fd());
  CHECK(f.present(8, ticket).error().code() == error_code::permission_denied);
  CHECK_FALSE(f.present(7, ticket));
  // Expired: refused, and forgotten.
  const auto late = f.handout->issue(f.job, 7, f.arena.fd());
  f.now += std::chrono::milliseconds(1001);
  CHECK(f.present(7, late).error().code() == error_code::permission_denied);
  CHECK(f.handout->outstanding() == 0);
  CHECK(f.handout->grants() == 0);
  CHECK(f.handout->refusals() == 4);  // "short" never reached the node
}

TEST_CASE("a connection that sends nothing is refused after the read deadline, and holds no "
          "other up",
          "[store]") {
  handout_fixture f;
  const int silent = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(silent >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, f.handout->name().data(), f.handout->name().size());
  REQUIRE(::connect(silent, reinterpret_cast<const sockaddr*>(&a),
                    static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                           f.handout->name().size())) == 0);
  // Served side by side: this one is answered while the silent one waits for its deadline.
  const auto ticket = f.handout->issue(f.job, 7, f.arena.fd());
  auto fd = f.present(7, ticket);
  REQUIRE(fd);
  ::close(*fd);
  char answer = 0;
  CHECK(::recv(silent, &answer, 1, 0) == 1);
  CHECK(answer == arena_handout::refused);
  CHECK(f.handout->refusals() == 1);
  ::close(silent);
}

TEST_CASE("the arena socket is abstract: no file names it", "[store]") {
  handout_fixture f;
  CHECK(f.handout->name().rfind("celer-arenas-", 0) == 0);
  std::ifstream unix_sockets("/proc/net/unix");
  std::string line;
  bool listed = false;
  while (std::getline(unix_sockets, line)) {
    if (line.find("@" + f.handout->name()) != std::string::npos) listed = true;
  }
  CHECK(listed);
}
