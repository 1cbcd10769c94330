// receiver_seat on its own, over fake sockets: which thread polls while the receiver thread
// runs work (the standby), while a thread waits for a reply (a borrower), and that two never
// poll at once. transport_seat_test.cpp runs the same seat inside zmq_transport.
#include "transport/receiver_seat.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

using namespace celer;
using namespace std::chrono_literals;

namespace {

/// What a transport's sockets do for the seat: messages arrive (here: functions to run), and
/// a doorbell rings. poll() behaves as zmq_transport::poll_once does.
class fake_sockets {
public:
  receiver_seat* seat = nullptr;

  bool poll(std::chrono::milliseconds timeout) {
    const receiver_seat::poller check(*seat);
    std::unique_lock lock(mutex_);
    if (stopped_) return false;
    auto ready = [&] { return !arrived_.empty() || rung_ || stopped_; };
    if (timeout.count() < 0) {
      cv_.wait(lock, ready);
    } else {
      cv_.wait_for(lock, timeout, ready);
    }
    if (rung_) {
      rung_ = false;
      seat->heard_wake();
      return !stopped_;
    }
    while (!arrived_.empty()) {
      auto handle = std::move(arrived_.front());
      arrived_.pop_front();
      lock.unlock();
      handle();
      if (seat->reclaim_wanted()) return true;
      lock.lock();
    }
    return !stopped_;
  }
  void ring(const char* word) {
    std::lock_guard lock(mutex_);
    rung_ = true;
    if (word[0] == 'w') ++wake_words;
    cv_.notify_all();
  }
  /// A message arrives; whichever thread holds the seat runs `handle`.
  void arrive(std::function<void()> handle) {
    std::lock_guard lock(mutex_);
    arrived_.push_back(std::move(handle));
    cv_.notify_all();
  }
  /// The transport stops: polls return false from now on (the seat is told after).
  void stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    cv_.notify_all();
  }
  int wake_words = 0;  // guarded by mutex_

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> arrived_;
  bool rung_ = false;
  bool stopped_ = false;
};

struct seat_fixture {
  fake_sockets sockets;
  receiver_seat seat;

  explicit seat_fixture(receiver_seat::options o)
      : seat(o, [this](std::chrono::milliseconds t) { return sockets.poll(t); },
             [this](const char* word) { sockets.ring(word); }) {
    sockets.seat = &seat;
    seat.start();
  }
  ~seat_fixture() {
    sockets.stop();
    seat.stop();
  }
  /// The thread that handles the next message to arrive.
  std::thread::id handler_of_next() {
    std::promise<std::thread::id> who;
    auto got = who.get_future();
    sockets.arrive([&] { who.set_value(std::this_thread::get_id()); });
    REQUIRE(got.wait_for(10s) == std::future_status::ready);
    return got.get();
  }
};

/// Which work ran, in which order, on which thread.
class ran_log {
public:
  void record(int n) {
    std::lock_guard lock(m_);
    order_.push_back(n);
    ran_on_.push_back(std::this_thread::get_id());
  }
  /// It ran `expected`, in that order, all on `thread`.
  void check(const std::vector<int>& expected, std::thread::id thread) {
    std::lock_guard lock(m_);
    CHECK(order_ == expected);
    for (const auto& id : ran_on_) CHECK(id == thread);
  }

private:
  std::mutex m_;
  std::vector<int> order_;
  std::vector<std::thread::id> ran_on_;
};

} // namespace

TEST_CASE("while work runs on the receiver thread the standby receives, and gives the seat "
          "back when the work ends",
          "[transport][seat]") {
  seat_fixture f({.standby_receiver = true, .standby_after = 1ms, .lend_seat = false});
  const auto receiver = f.handler_of_next();

  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<std::thread::id> worker, during;
  std::promise<void> work_done;
  f.sockets.arrive([&] {
    f.seat.run_on_receiver([&] {
      worker.set_value(std::this_thread::get_id());
      released.wait();  // a long task
    });
    work_done.set_value();
  });
  CHECK(worker.get_future().get() == receiver);
  // The receiver thread is busy: the next message is handled all the same, by the standby.
  f.sockets.arrive([&] {
    during.set_value(std::this_thread::get_id());
    release.set_value();
  });
  const auto standby = during.get_future().get();
  CHECK(standby != receiver);
  REQUIRE(work_done.get_future().wait_for(10s) == std::future_status::ready);
  CHECK(f.handler_of_next() == receiver);
  CHECK(f.seat.overlaps() == 0);
}

TEST_CASE("work handed over on the standby runs on the receiver thread after the work it "
          "runs, in order",
          "[transport][seat]") {
  seat_fixture f({.standby_receiver = true, .standby_after = 1ms, .lend_seat = false});
  const auto receiver = f.handler_of_next();
  ran_log log;
  auto record = [&](int n) { log.record(n); };
  std::promise<void> release, all_ran;
  auto released = release.get_future().share();
  f.sockets.arrive([&] {
    f.seat.run_on_receiver([&] {
      released.wait();
      record(1);
    });
  });
  f.sockets.arrive([&] {  // on the standby, while 1 runs
    f.seat.run_on_receiver([&] { record(2); });
    f.seat.run_on_receiver([&] {
      record(3);
      all_ran.set_value();
    });
    release.set_value();
  });
  REQUIRE(all_ran.get_future().wait_for(10s) == std::future_status::ready);
  log.check({1, 2, 3}, receiver);
  CHECK(f.seat.overlaps() == 0);
}

TEST_CASE("work posted from another thread runs on the receiver thread: at once when it polls, "
          "after its work when it runs some",
          "[transport][seat]") {
  seat_fixture f({.standby_receiver = true, .standby_after = 1ms, .lend_seat = false});
  const auto receiver = f.handler_of_next();
  // The receiver polls: the post rings it out of its poll.
  std::promise<std::thread::id> ran;
  std::thread([&] { f.seat.post([&] { ran.set_value(std::this_thread::get_id()); }); }).join();
  auto got = ran.get_future();
  REQUIRE(got.wait_for(10s) == std::future_status::ready);
  CHECK(got.get() == receiver);
  // The receiver runs long work (the standby holds the seat): a post waits for it, in order.
  ran_log log;
  auto record = [&](int n) { log.record(n); };
  std::promise<void> release, started, all_ran;
  auto released = release.get_future().share();
  f.sockets.arrive([&] {
    f.seat.run_on_receiver([&] {
      started.set_value();
      released.wait();
      record(1);
    });
  });
  started.get_future().wait();
  std::thread([&] {
    f.seat.post([&] {
      record(2);
      all_ran.set_value();
    });
  }).join();
  release.set_value();
  REQUIRE(all_ran.get_future().wait_for(10s) == std::future_status::ready);
  log.check({1, 2}, receiver);
  CHECK(f.seat.overlaps() == 0);
}

TEST_CASE("a waiting thread borrows the seat, handles what arrives itself, and gives it back",
          "[transport][seat]") {
  seat_fixture f({.standby_receiver = false, .standby_after = 1ms, .lend_seat = true});
  const auto receiver = f.handler_of_next();
  std::atomic<bool> handled{false};
  std::thread::id handler;
  bool sent = false;
  const bool borrowed = f.seat.receive_until(
    [&] {
      // Called once the seat is this thread's: the reply arrives now.
      if (!sent) {
        sent = true;
        f.sockets.arrive([&] {
          handler = std::this_thread::get_id();
          handled = true;
        });
      }
      return handled.load();
    },
    std::chrono::steady_clock::now() + 10s);
  CHECK(borrowed);
  CHECK(handled);
  CHECK(handler == std::this_thread::get_id());
  // Given back (parked, then taken back by the receiver thread).
  CHECK(f.handler_of_next() == receiver);
  CHECK(f.seat.overlaps() == 0);
}

TEST_CASE("the seat is not lent to the receiver thread, nor without lend_seat", "[transport][seat]") {
  SECTION("without lend_seat") {
    seat_fixture f({.standby_receiver = false, .standby_after = 1ms, .lend_seat = false});
    (void)f.handler_of_next();  // the receiver thread runs
    CHECK_FALSE(f.seat.receive_until([] { return false; }, std::chrono::steady_clock::now() + 10s));
  }
  SECTION("on the receiver thread") {
    seat_fixture f({.standby_receiver = false, .standby_after = 1ms, .lend_seat = true});
    std::promise<bool> lent;
    f.sockets.arrive([&] {
      lent.set_value(f.seat.receive_until([] { return false; }, std::chrono::steady_clock::now() + 10s));
    });
    CHECK_FALSE(lent.get_future().get());
  }
}

TEST_CASE("wakes while the borrower is busy ring the doorbell once", "[transport][seat]") {
  seat_fixture f({.standby_receiver = false, .standby_after = 1ms, .lend_seat = true});
  (void)f.handler_of_next();
  std::atomic<bool> done{false};
  bool sent = false;
  std::thread waker;
  const bool borrowed = f.seat.receive_until(
    [&] {
      if (!sent) {
        sent = true;
        // The borrower handles this message: a thousand wakes come meanwhile, unread.
        f.sockets.arrive([&] {
          waker = std::thread([&] {
            for (int i = 0; i < 1000; ++i) f.seat.wake_receiving();
          });
          waker.join();
          done = true;
        });
      }
      return done.load();
    },
    std::chrono::steady_clock::now() + 10s);
  CHECK(borrowed);
  CHECK(f.sockets.wake_words == 1);
}

TEST_CASE("a stop ends a borrow at once", "[transport][seat]") {
  seat_fixture f({.standby_receiver = false, .standby_after = 1ms, .lend_seat = true});
  (void)f.handler_of_next();
  std::thread stopper;
  bool asked = false;
  const auto start = std::chrono::steady_clock::now();
  const bool borrowed = f.seat.receive_until(
    [&] {
      if (!asked) {
        asked = true;
        stopper = std::thread([&] {
          f.sockets.stop();
          f.seat.stop();
        });
      }
      return false;
    },
    start + 60s);
  stopper.join();
  CHECK(borrowed);
  CHECK(std::chrono::steady_clock::now() - start < 30s);
}
