// The head's failure detection, driven message by message with a fake clock.
#include "fakes/recording_transport.hpp"
#include "head/head.hpp"

#include <celer/version.hpp>

#include <catch2/catch.hpp>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct head_fixture {
  fakes::recording_transport net;
  std::chrono::steady_clock::time_point now{};
  head h{net, address{unique_id{0, 1}, {}}, 1000ms, 0.5, [this] { return now; }};

  void handle(protocol::message m) { h.handle(m); }
  address join(const node_id& n) {
    const address a{n, "tcp://10.0.0.1:" + std::to_string(n.lo % 60000)};
    protocol::register_node r;
    r.protocol_version = protocol_version;
    r.node = n;
    r.node_address = a;
    r.total = *protocol::make_request(2, 0, 0, {});
    handle(r);
    return a;
  }
  void heartbeat(const node_id& n) {
    protocol::heartbeat b;
    b.node = n;
    b.available = *protocol::make_request(2, 0, 0, {});
    handle(b);
  }
};

} // namespace

TEST_CASE("a silent node is declared dead once, everyone is told, and it is told when it "
          "comes back",
          "[head][fault]") {
  head_fixture f;
  const node_id quiet = node_id::random(), live = node_id::random();
  const address quiet_addr = f.join(quiet);
  const address live_addr = f.join(live);
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};
  f.handle(protocol::subscribe_cluster{driver});

  f.now += 600ms;
  f.heartbeat(live);
  f.handle(protocol::tick{});
  REQUIRE(f.net.take<protocol::node_died>().empty());  // within the timeout

  f.now += 600ms;  // quiet: 1.2 s silent; live: 0.6 s
  f.heartbeat(live);
  f.handle(protocol::tick{});
  auto died = f.net.take<protocol::node_died>();
  REQUIRE(died.size() == 2);  // the subscriber and the live node, not the dead one
  for (const auto& [to, m] : died) {
    CHECK(m.node == quiet);
    CHECK(m.reason.find("no heartbeat for 1200 ms") != std::string::npos);
    CHECK((to == driver || to == live_addr));
  }

  f.now += 5000ms;
  f.heartbeat(live);
  f.handle(protocol::tick{});
  REQUIRE(f.net.take<protocol::node_died>().empty());  // declared once

  // The dead node speaks again (a partition healed): it is told, and stays dead.
  f.heartbeat(quiet);
  auto told = f.net.take<protocol::node_died>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == quiet_addr);
  CHECK(told[0].second.node == quiet);
  CHECK(told[0].second.reason.find("declared this node dead") != std::string::npos);
  f.handle(protocol::tick{});
  REQUIRE(f.net.take<protocol::node_died>().empty());

  // Restarted, it joins as a new node, alive.
  const node_id again = node_id::random();
  f.join(again);
  f.heartbeat(again);
  f.handle(protocol::tick{});
  REQUIRE(f.net.take<protocol::node_died>().empty());
}
