#pragma once
// Tests of the node's store: map the arena a store_reply names, as a process on the node
// does (its ticket traded for the fd at the node's socket), read-write for the test to fill.
#include "node/arena_handout.hpp"
#include "protocol/messages.hpp"

#include <celer/store/shm_arena.hpp>

#include <catch2/catch.hpp>

#include <chrono>

namespace celer::test {

inline store::shm_segment arena_of(const protocol::store_reply& r) {
  auto fd = fetch_arena_fd(r.socket, r.arena, r.ticket, std::chrono::seconds(5));
  REQUIRE(fd);
  auto seg = store::shm_segment::adopt(*fd, r.capacity, store::shm_access::read_write);
  REQUIRE(seg);
  return std::move(*seg);
}

} // namespace celer::test
