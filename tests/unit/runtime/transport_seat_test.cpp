// zmq_transport::receive_until between real sockets in this process: a thread waiting for a
// message's effect (a driver's get) takes the seat from the receiver thread, handles what
// arrives itself, and hands the seat back; one borrower at a time; a wake, the deadline and
// the stop each end a borrow.
#include "host.hpp"
#include "transport/zmq_transport.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

using namespace celer;
using namespace std::chrono_literals;

namespace {

using steady = std::chrono::steady_clock;

/// A process's end whose component `id` is handled directly on the thread receiving, as a
/// driver's core is; records which thread handled each message.
struct seat_fixture {
  component_host host{2};
  zmq_transport net;
  unique_id id = unique_id::random();
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::thread::id> handled_on;
  /// While true, a handler waits (the thread receiving is busy) until it is set false.
  bool hold = false;

  explicit seat_fixture(bool lend_seat)
    : net(host.local(), options(lend_seat)) {
    net.handle_directly(id, [this](protocol::message&) {
      std::unique_lock lock(mutex);
      handled_on.push_back(std::this_thread::get_id());
      cv.notify_all();
      cv.wait_for(lock, 30s, [&] { return !hold; });
    });
    net.start();
  }
  ~seat_fixture() {
    host.stop();
    net.stop();
  }
  static zmq_transport::options options(bool lend_seat) {
    zmq_transport::options o;
    o.bind = "tcp://127.0.0.1:*";
    o.creds = *credentials::for_cluster("seat-token");
    o.lend_seat = lend_seat;
    return o;
  }
  [[nodiscard]] address where() const { return {id, net.endpoint()}; }
  void set_hold(bool on) {
    std::lock_guard lock(mutex);
    hold = on;
    cv.notify_all();
  }
  std::size_t handled() {
    std::lock_guard lock(mutex);
    return handled_on.size();
  }
  /// The thread that handled the n-th message (waits for it, at most 10 s).
  std::thread::id nth(std::size_t n) {
    std::unique_lock lock(mutex);
    REQUIRE(cv.wait_for(lock, 10s, [&] { return handled_on.size() > n; }));
    return handled_on[n];
  }
};

/// A sender in another "process" (its own transport).
struct sender {
  component_host host{1};
  zmq_transport net{host.local(), seat_fixture::options(false)};
  sender() { net.start(); }
  ~sender() {
    host.stop();
    net.stop();
  }
  void send(const address& to) {
    REQUIRE(net.send(to, protocol::return_lease{worker_id::random(), task_id::random()}));
  }
};

/// A thread that borrows the seat (receive_until on it) until `done` or `until`; seated()
/// returns once it holds the seat (`done` is first asked then). Its results are read after
/// join(): Catch's assertions are not thread-safe.
struct borrowing_thread {
  std::promise<void> seated_promise;
  std::future<void> seated_future = seated_promise.get_future();
  std::thread::id id;
  bool received = false;
  std::thread thread;

  borrowing_thread(zmq_transport& net, std::function<bool()> done, steady::time_point until)
    : thread([this, &net, done = std::move(done), until] {
        id = std::this_thread::get_id();
        bool told = false;
        received = net.receive_until(
          [&] {
            if (!told) {
              told = true;
              seated_promise.set_value();
            }
            return done();
          },
          until);
      }) {}
  void seated() { seated_future.wait(); }
  void join() { thread.join(); }
};

} // namespace

TEST_CASE("a thread waiting for a message takes it off the socket itself, then the receiver "
          "thread receives again", "[transport][seat]") {
  seat_fixture a(true);
  sender b;
  b.send(a.where());  // the connection up, handled by the receiver thread
  const auto receiver = a.nth(0);

  borrowing_thread t(a.net, [&] { return a.handled() >= 2; }, steady::now() + 30s);
  t.seated();
  b.send(a.where());
  t.join();
  CHECK(t.received);
  CHECK(a.nth(1) == t.id);
  CHECK(a.nth(1) != receiver);

  // The seat goes back (parked a moment, then taken back): the receiver thread receives.
  b.send(a.where());
  CHECK(a.nth(2) != t.id);
}

TEST_CASE("one borrower at a time: a second waiting thread is told to wait as before",
          "[transport][seat]") {
  seat_fixture a(true);
  sender b;
  b.send(a.where());
  (void)a.nth(0);  // the receiver thread runs (before it does, nothing is lent)
  std::atomic<bool> release{false};
  borrowing_thread t(a.net, [&] { return release.load(); }, steady::now() + 30s);
  t.seated();
  const auto before = steady::now();
  CHECK_FALSE(a.net.receive_until([] { return false; }, steady::now() + 30s));
  CHECK(steady::now() - before < 10s);  // at once, not after its deadline
  // Something the borrower waits for happened on another thread: the wake ends its borrow.
  release = true;
  a.net.wake_receiving();
  t.join();
  CHECK(t.received);
}

TEST_CASE("a borrow ends at its deadline with nothing received, and a stop ends one at once",
          "[transport][seat]") {
  seat_fixture a(true);
  sender b;
  b.send(a.where());
  (void)a.nth(0);
  const auto start = steady::now();
  CHECK(a.net.receive_until([] { return false; }, start + 100ms));
  CHECK(steady::now() - start >= 100ms);

  borrowing_thread t(a.net, [] { return false; }, steady::now() + 600s);
  t.seated();
  a.net.stop();  // the borrower's poll sees it; the receiver thread then ends
  t.join();
  CHECK_FALSE(a.net.receive_until([] { return false; }, steady::now() + 600s));
}

TEST_CASE("without lend_seat nothing is lent: the caller waits as before",
          "[transport][seat]") {
  seat_fixture a(false);
  CHECK_FALSE(a.net.receive_until([] { return false; }, steady::now() + 600s));
}

TEST_CASE("wakes are a doorbell: thousands while the borrower is not reading never block the "
          "waker", "[transport][seat]") {
  seat_fixture a(true);
  sender b;
  b.send(a.where());
  (void)a.nth(0);
  // The borrower sits in done() (not reading its doorbell) until 10,000 wakes have rung.
  // Were each a queued word, the pipe would fill (ZeroMQ's high-water mark) and a waker
  // block, holding the seat's lock the borrower needs to give the seat back.
  std::atomic<bool> rung{false};
  borrowing_thread t(
    a.net,
    [&] {
      const auto give_up = steady::now() + 30s;
      while (!rung && steady::now() < give_up) std::this_thread::yield();
      return rung.load();
    },
    steady::now() + 60s);
  t.seated();
  for (int i = 0; i < 10'000; ++i) a.net.wake_receiving();
  rung = true;
  t.join();
  CHECK(t.received);
  // The seat went back: the receiver thread receives.
  b.send(a.where());
  CHECK(a.nth(1) != std::thread::id{});
}

TEST_CASE("a thread waiting for the seat stops waiting once the receiver thread brings what "
          "it waits for", "[transport][seat]") {
  seat_fixture a(true);
  sender b;
  b.send(a.where());
  (void)a.nth(0);
  // The receiver thread is busy in a handler, so it cannot lend the seat.
  a.set_hold(true);
  b.send(a.where());
  (void)a.nth(1);
  std::atomic<bool> returned{false};
  bool received = true;
  std::thread t([&] {
    received = a.net.receive_until([] { return false; }, steady::now() + 60s);
    returned = true;
  });
  // What the thread waits for arrives on the receiver thread (the wake a fill there makes),
  // before or after the thread began to wait for the seat.
  const auto give_up = steady::now() + 30s;
  while (!returned && steady::now() < give_up) {
    a.net.wake_receiving();
    std::this_thread::sleep_for(1ms);
  }
  const bool returned_while_busy = returned.load();
  a.set_hold(false);
  t.join();
  CHECK(returned_while_busy);  // not after the handler, nor at its 60 s deadline
  CHECK_FALSE(received);       // it never had the seat: the caller waits as before
}

TEST_CASE("a thread waiting for the seat gives up at its deadline", "[transport][seat]") {
  seat_fixture a(true);
  sender b;
  b.send(a.where());
  (void)a.nth(0);
  a.set_hold(true);  // the receiver thread is busy and lends nothing
  b.send(a.where());
  (void)a.nth(1);
  const auto start = steady::now();
  const bool received = a.net.receive_until([] { return false; }, start + 200ms);
  const auto waited = steady::now() - start;
  a.set_hold(false);
  CHECK_FALSE(received);
  CHECK(waited >= 200ms);
  CHECK(waited < 20s);
}

TEST_CASE("work handed to the receiver thread from the standby runs there in order, and the "
          "two threads never poll at once", "[transport][seat][standby]") {
  // A worker process's shape: each message's work runs on the receiver thread; while a long
  // one runs, the standby receives, and hands what it receives to the receiver thread.
  component_host host{2};
  auto o = seat_fixture::options(false);
  o.standby_receiver = true;
  zmq_transport net(host.local(), o);
  const unique_id id = unique_id::random();
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::pair<int, std::thread::id>> ran;  // (message number, thread)
  int received = 0;
  net.handle_directly(id, [&](protocol::message&) {
    int n = 0;
    {
      std::lock_guard lock(mutex);
      n = received++;
    }
    net.run_on_receiver([&, n] {
      if (n == 0) std::this_thread::sleep_for(100ms);  // a long task: the standby takes over
      std::lock_guard lock(mutex);
      ran.emplace_back(n, std::this_thread::get_id());
      cv.notify_all();
    });
  });
  net.start();
  sender b;
  const address to{id, net.endpoint()};
  auto wait_ran = [&](std::size_t count) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, 30s, [&] { return ran.size() >= count; });
  };
  b.send(to);
  REQUIRE(wait_ran(1));
  b.send(to);  // work 0 of this round is long (n == 1 is not; send one more first)
  REQUIRE(wait_ran(2));
  {
    std::lock_guard lock(mutex);
    received = 0;  // the next message's work is long
  }
  for (int i = 0; i < 20; ++i) b.send(to);
  REQUIRE(wait_ran(22));
  // After the deferred work the receiver thread receives alone again.
  for (int i = 0; i < 20; ++i) b.send(to);
  REQUIRE(wait_ran(42));
  const auto overlaps = net.stats().seat_overlaps;
  host.stop();
  net.stop();
  CHECK(overlaps == 0);
  std::lock_guard lock(mutex);
  const auto receiver = ran.front().second;
  for (std::size_t i = 0; i < ran.size(); ++i) CHECK(ran[i].second == receiver);
  for (std::size_t i = 2; i < 22; ++i) CHECK(ran[i].first == static_cast<int>(i) - 2);  // in order
}
