// peer_table (transport/peer_table.hpp): the connections a transport keeps open, at most
// max, the least recently used closed first. transport_test.cpp checks the same between
// real processes' transports.
#include "transport/zmq_peer.hpp"

#include <catch2/catch.hpp>

#include <zmq.hpp>

#include <memory>
#include <string>

using namespace celer;

TEST_CASE("past its bound the table closes the connection used least recently", "[transport]") {
  zmq::context_t ctx;
  peer_table table(/*max=*/2);
  int opened = 0;
  auto open = [&]() -> std::shared_ptr<zmq_peer> {
    ++opened;
    return std::make_shared<zmq_peer>(ctx);
  };
  const auto a = table.get("tcp://a:1", open);
  const auto b = table.get("tcp://b:1", open);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(table.get("tcp://a:1", open) == a);  // open already: a is now the most recent
  CHECK(opened == 2);
  const auto c = table.get("tcp://c:1", open);
  CHECK(opened == 3);
  CHECK(table.size() == 2);
  CHECK(table.take("tcp://b:1") == nullptr);  // b went
  CHECK(table.take("tcp://a:1") == a);
  CHECK(table.size() == 1);
  table.close_all();
  CHECK(table.size() == 0);
}

TEST_CASE("a connection that cannot be opened is not kept and closes none", "[transport]") {
  zmq::context_t ctx;
  peer_table table(/*max=*/1);
  const auto a = table.get("tcp://a:1", [&] { return std::make_shared<zmq_peer>(ctx); });
  CHECK(table.get("tcp://b:1", [] { return std::shared_ptr<zmq_peer>(); }) == nullptr);
  CHECK(table.size() == 1);
  CHECK(table.get("tcp://a:1", [] { return std::shared_ptr<zmq_peer>(); }) == a);
  table.close_all();
}
