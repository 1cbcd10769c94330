// The seat of zmq_transport (zmq_transport.hpp): which one thread polls the sockets now.
// The receiver thread, the standby that receives while the receiver runs work
// (run_on_receiver), and a thread that waits for a reply and receives it itself
// (receive_until) take turns, never at once.
#include "transport/zmq_transport.hpp"

#include <zmq.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

namespace celer {

void zmq_transport::ring(const char* word) {
  // A doorbell, never a queue: with the pipe full (a word is waiting unread) there is
  // nothing to add, and a send that blocked here would hold seat_mutex_ until the reader,
  // which needs that mutex, read.
  (void)wake_tx_->send(zmq::buffer(word, 1), zmq::send_flags::dontwait);
}

void zmq_transport::receive_loop() {
  {
    std::lock_guard lock(seat_mutex_);
    receiver_id_ = std::this_thread::get_id();
  }
  // Wake now and then while handshakes wait for the head, to refuse those it never answers.
  while (poll_once(std::chrono::milliseconds(-1))) {
    if (borrow_wanted_.load(std::memory_order_acquire)) lend_seat();
  }
}

void zmq_transport::lend_seat() {
  std::unique_lock lock(seat_mutex_);
  if (!borrow_wanted_ || seat_lent_) return;
  seat_lent_ = true;
  parked_since_ = std::chrono::steady_clock::now();
  seat_cv_.notify_all();
  // Back once parked (lent, no borrower) for park_limit, or at the stop once the borrower
  // has left (its poll sees the stop).
  for (;;) {
    if (borrowed_) {
      // Told when it is given back: a long get costs this thread no wake meanwhile.
      awaiting_return_ = true;
      seat_cv_.wait(lock, [&] { return !borrowed_; });
      awaiting_return_ = false;
      continue;
    }
    if (borrow_wanted_) {  // lent, and the borrower not woken yet
      seat_cv_.wait_for(lock, park_limit);
      continue;
    }
    const auto back_at = parked_since_ + park_limit;
    if (stopped_ || std::chrono::steady_clock::now() >= back_at) break;
    seat_cv_.wait_until(lock, back_at);
  }
  seat_lent_ = false;
  borrow_wanted_ = false;
}

bool zmq_transport::receive_until(const std::function<bool()>& done,
                                  std::chrono::steady_clock::time_point until) {
  if (!opts_.lend_seat || opts_.standby_receiver) return false;
  {
    std::unique_lock lock(seat_mutex_);
    // One borrower at a time: another receives, or is about to.
    if (stopped_ || borrowed_ || borrow_wanted_ || receiver_id_ == std::thread::id{} ||
        std::this_thread::get_id() == receiver_id_) {
      return false;
    }
    if (!seat_lent_) {
      borrow_wanted_ = true;
      woken_while_wanted_ = false;
      // The receiver leaves its poll and lends the seat (while the request is still out,
      // mostly: off the reply's path).
      ring("g");
      // Until the deadline, and no longer than it takes the receiver thread to receive
      // what this thread waits for (wake_receiving says so): then this thread has nothing
      // to receive, and the caller looks at what it waits for.
      auto lent = [&] {
        return (seat_lent_ && !borrowed_) || woken_while_wanted_ || stopped_.load();
      };
      if (until == std::chrono::steady_clock::time_point::max()) {
        seat_cv_.wait(lock, lent);
      } else {
        seat_cv_.wait_until(lock, until, lent);
      }
      if (!seat_lent_ || borrowed_ || stopped_) {
        // Not lent (yet): withdrawn. A receiver thread that lends it now finds no one and
        // takes it back after park_limit.
        borrow_wanted_ = false;
        return false;
      }
    }
    borrowed_ = true;  // lent just now, or parked since an earlier wait
    borrow_wanted_ = false;
  }
  // Bounded slices: a wake lost to a race costs a slice, never the whole wait.
  constexpr auto slice = std::chrono::milliseconds(20);
  while (!done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) break;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now);
    if (!poll_once(std::min<std::chrono::milliseconds>(left, slice))) break;  // stopping
  }
  std::lock_guard lock(seat_mutex_);
  borrowed_ = false;
  parked_since_ = std::chrono::steady_clock::now();
  // Parked: a get soon after takes it again; the receiver takes it back after park_limit.
  if (awaiting_return_) seat_cv_.notify_all();
  return true;
}

void zmq_transport::wake_receiving() {
  std::lock_guard lock(seat_mutex_);
  if (stopped_) return;
  if (borrowed_) {
    // One word until the borrower reads: a burst of fills costs one wake, not one each.
    if (!woken_.exchange(true, std::memory_order_acq_rel)) ring("w");
  } else if (borrow_wanted_) {
    woken_while_wanted_ = true;  // still waiting for the seat: what it waits for is here
    seat_cv_.notify_all();
  }
}

void zmq_transport::run_on_receiver(std::function<void()> work) {
  std::unique_lock lock(seat_mutex_);
  if (std::this_thread::get_id() != receiver_id_) {
    // The standby holds the seat while the receiver runs earlier work: after that.
    deferred_.push_back(std::move(work));
    return;
  }
  // The receiver thread holds the seat now, and frees it for the work; only once: while it
  // runs deferred work the seat stays as it is (free, or taken by the standby, which keeps
  // it until reclaimed below). Freeing it again there let both threads poll the socket.
  bool release = true;
  for (;;) {
    if (release) {
      seat_free_ = true;
      release = false;
      pollers_.fetch_sub(1, std::memory_order_acq_rel);  // called inside poll_once: out of it
    }
    working_ = true;
    work_since_ = std::chrono::steady_clock::now();
    if (opts_.standby_receiver && !standby_armed_) {
      standby_armed_ = true;
      seat_cv_.notify_all();
    }
    lock.unlock();
    work();
    lock.lock();
    if (!deferred_.empty()) {
      work = std::move(deferred_.front());
      deferred_.pop_front();
      continue;
    }
    working_ = false;
    work_ended_ = std::chrono::steady_clock::now();
    if (!seat_free_) {
      // The standby took the seat: it leaves its poll and gives it back.
      reclaim_ = true;
      if (!stopped_) ring("r");
      seat_cv_.wait(lock, [&] { return seat_free_ || stopped_.load(); });
      reclaim_ = false;
    }
    seat_free_ = false;  // the receiver thread's again
    if (pollers_.fetch_add(1, std::memory_order_acq_rel) != 0) seat_overlaps_.fetch_add(1);
    if (deferred_.empty()) return;
    work = std::move(deferred_.front());
    deferred_.pop_front();
    release = true;
  }
}

void zmq_transport::receiver_waits() {
  if (!opts_.standby_receiver) return;
  std::lock_guard lock(seat_mutex_);
  if (!working_ || !seat_free_ || std::this_thread::get_id() != receiver_id_) return;
  work_since_ = std::chrono::steady_clock::time_point{};  // due now
  standby_armed_ = true;
  seat_cv_.notify_all();
}

void zmq_transport::standby_loop() {
  std::unique_lock lock(seat_mutex_);
  // Disarmed after this long without work: it sleeps until the next work starts.
  constexpr auto disarm_after = std::chrono::milliseconds(50);
  while (!stopped_) {
    if (!standby_armed_) {
      seat_cv_.wait(lock, [&] { return standby_armed_ || stopped_.load(); });
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (working_ && seat_free_) {
      const auto due = work_since_ + opts_.standby_after;
      if (now < due) {
        seat_cv_.wait_until(lock, due);
        continue;
      }
      // The work runs long: receive meanwhile, until the receiver wants the seat back.
      seat_free_ = false;
      lock.unlock();
      bool more = true;
      while (more && !reclaim_) more = poll_once(std::chrono::milliseconds(-1));
      lock.lock();
      seat_free_ = true;
      seat_cv_.notify_all();
      continue;
    }
    if (!working_ && now - work_ended_ >= disarm_after) {
      standby_armed_ = false;
      continue;
    }
    // The receiver holds the seat between works: look again a little later.
    seat_cv_.wait_for(lock, opts_.standby_after);
  }
}

} // namespace celer
