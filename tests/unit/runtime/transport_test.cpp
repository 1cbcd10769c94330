// The cluster transport between real sockets in this process: messages arrive, the token
// is enforced, and garbage thrown at a live socket is refused while the process keeps
// serving.
#include "host.hpp"
#include "transport/wire.hpp"
#include "transport/zmq_transport.hpp"

#include <celer/version.hpp>

#include <catch2/catch.hpp>

#include <zmq.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

using namespace celer;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

/// A component that keeps what it receives.
struct inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<protocol::message> got;
  void handle(protocol::message& m) {
    std::lock_guard lock(mutex);
    got.push_back(std::move(m));
    cv.notify_all();
  }
  bool wait_for(std::size_t n, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, limit, [&] { return got.size() >= n; });
  }
  std::size_t size() {
    std::lock_guard lock(mutex);
    return got.size();
  }
};

/// One process's end: a host with an inbox component, and its transport.
struct endpoint_fixture {
  component_host host{2};
  std::shared_ptr<inbox> box = std::make_shared<inbox>();
  unique_id box_id = unique_id::random();
  zmq_transport net;
  endpoint_fixture(const std::string& token, std::size_t max_body = 1u << 20)
    : net(host.local(), {"tcp://127.0.0.1:*", token, max_body}) {
    host.spawn(box_id, as_component(box), "inbox");
    net.start();
  }
  ~endpoint_fixture() {
    (void)host.local().send(address{box_id, {}}, protocol::shutdown_component{});
    host.stop();
    net.stop();
  }
  [[nodiscard]] address box_address() const { return {box_id, net.endpoint()}; }
};

protocol::message sample() { return protocol::return_lease{worker_id::random(), task_id::random()}; }

void send_frames(zmq::socket_t& s, const std::vector<std::string>& frames) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    s.send(zmq::buffer(frames[i]),
           i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

std::string id_bytes(const unique_id& id) {
  std::string out(16, '\0');
  for (int i = 0; i < 8; ++i) {
    out[static_cast<std::size_t>(i)] = static_cast<char>(id.hi >> (56 - 8 * i));
    out[static_cast<std::size_t>(8 + i)] = static_cast<char>(id.lo >> (56 - 8 * i));
  }
  return out;
}

} // namespace

TEST_CASE("messages travel between two transports that share the token", "[transport]") {
  endpoint_fixture a("token-1"), b("token-1");
  for (int i = 0; i < 100; ++i) REQUIRE(a.net.send(b.box_address(), sample()));
  REQUIRE(b.box->wait_for(100, 10s));
  REQUIRE(b.net.stats().hellos_accepted == 1);  // one connection, one hello
  REQUIRE(a.net.probe(b.net.endpoint(), 5s).has_value());
}

TEST_CASE("a wrong or missing token is refused, logged and never delivered", "[transport]") {
  endpoint_fixture server("right-token"), intruder("wrong-token"), anonymous("");
  auto probe = intruder.net.probe(server.net.endpoint(), 5s);
  REQUIRE_FALSE(probe.has_value());
  REQUIRE(probe.error().code() == error_code::unauthenticated);
  REQUIRE_THAT(probe.error().message(), Contains("wrong cluster token"));
  auto none = anonymous.net.probe(server.net.endpoint(), 5s);
  REQUIRE_THAT(none.error().message(), Contains("no cluster token"));

  for (int i = 0; i < 10; ++i) (void)intruder.net.send(server.box_address(), sample());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (server.net.stats().unauthenticated < 10 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE(server.net.stats().unauthenticated == 10);
  REQUIRE(server.box->size() == 0);
}

TEST_CASE("a probe of an endpoint where nothing listens fails within its timeout", "[transport]") {
  endpoint_fixture a("t");
  auto r = a.net.probe("tcp://127.0.0.1:1", 100ms);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.error().code() == error_code::unavailable);
}

TEST_CASE("generated garbage at a live socket is refused and the process keeps serving",
          "[transport][fuzz]") {
  endpoint_fixture server("tok"), friendly("tok");
  zmq::context_t ctx;
  std::mt19937_64 gen(20261129);
  auto random_bytes = [&](std::size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(gen());
    return s;
  };
  const std::string good_hello = wire::encode_hello({std::string(wire::magic), protocol_version, "tok", "test"});
  const auto valid = wire::encode(sample());
  std::vector<zmq::socket_t> sockets;  // kept open until the server has read everything
  for (int conn = 0; conn < 40; ++conn) {
    auto& s = sockets.emplace_back(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(server.net.endpoint());
    switch (conn % 8) {
      case 0:  // messages with no hello
        send_frames(s, {"M", id_bytes(server.box_id), valid[0], valid[1]});
        break;
      case 1:  // a hello of random bytes
        send_frames(s, {"H", random_bytes(gen() % 200)});
        break;
      case 2:  // a hello from another protocol version
        send_frames(s, {"H", wire::encode_hello({std::string(wire::magic), protocol_version + 1, "tok", "x"})});
        break;
      case 3:  // a hello of 1 MiB
        send_frames(s, {"H", std::string(1 << 20, 'x')});
        break;
      case 4:  // frames of unknown kind and random count
        for (int k = 0; k < 5; ++k) {
          std::vector<std::string> frames;
          for (std::uint64_t f = 0; f < 1 + gen() % 7; ++f) frames.push_back(random_bytes(gen() % 40));
          send_frames(s, frames);
        }
        break;
      default: {  // authenticated, then mangled messages
        send_frames(s, {"H", good_hello});
        for (int k = 0; k < 25; ++k) {
          auto frames = valid;
          switch (k % 5) {
            case 0: frames[1] = random_bytes(gen() % 64); break;
            case 1:  // a header that claims 2 GiB
              frames[0] = detail::pack(wire::header{std::string(wire::magic), protocol_version, 2, 2ull << 30});
              break;
            case 2:  // an unknown message type
              frames[0] = detail::pack(wire::header{std::string(wire::magic), protocol_version, 999, frames[1].size()});
              break;
            case 3: frames[1].resize(frames[1].size() / 2); break;  // truncated
            case 4: frames.pop_back(); break;                      // a frame missing
          }
          std::vector<std::string> all{"M", id_bytes(server.box_id)};
          all.insert(all.end(), frames.begin(), frames.end());
          if (k % 7 == 6) all[1] = "short-id";
          send_frames(s, all);
        }
        break;
      }
    }
  }
  // Everything sent has been read once the counters stop moving.
  auto total = [&] {
    const auto st = server.net.stats();
    return st.hellos_refused + st.unauthenticated + st.malformed + st.hellos_accepted;
  };
  for (auto last = total() + 1; last != total();) {
    last = total();
    std::this_thread::sleep_for(200ms);
  }
  // The server still serves: a well-behaved peer's messages arrive.
  for (int i = 0; i < 5; ++i) REQUIRE(friendly.net.send(server.box_address(), sample()));
  REQUIRE(server.box->wait_for(5, 10s));
  const auto st = server.net.stats();
  CHECK(st.hellos_refused >= 15);
  CHECK(st.unauthenticated >= 5);
  CHECK(st.malformed >= 60);
  REQUIRE(server.box->size() == 5);  // nothing mangled was delivered
}

TEST_CASE("a frame larger than max_message_bytes closes the connection unread", "[transport]") {
  endpoint_fixture server("tok", 64 * 1024), sender("tok");
  protocol::object_reply big;
  big.object.payload = std::string(256 * 1024, 'x');
  (void)sender.net.send(server.box_address(), big);
  // A fresh peer is served normally afterwards.
  endpoint_fixture other("tok");
  REQUIRE(other.net.send(server.box_address(), sample()));
  REQUIRE(server.box->wait_for(1, 10s));
  std::this_thread::sleep_for(100ms);
  REQUIRE(server.box->size() == 1);
  for (const auto& m : server.box->got) REQUIRE(std::holds_alternative<protocol::return_lease>(m));
}
