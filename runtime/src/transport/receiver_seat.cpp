// The seat of a receiving transport (receiver_seat.hpp): which one thread polls the sockets
// now. The receiver thread, the standby that receives while the receiver runs work
// (run_on_receiver), and a thread that waits for a reply and receives it itself
// (receive_until) take turns, never at once.
#include "transport/receiver_seat.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace celer {

receiver_seat::receiver_seat(options o, poll_fn poll, ring_fn ring)
    : opts_(o), poll_(std::move(poll)), ring_(std::move(ring)) {}

receiver_seat::~receiver_seat() { stop(); }

void receiver_seat::start() {
  receiver_ = std::thread([this] { receive_loop(); });
  if (opts_.standby_receiver) standby_ = std::thread([this] { standby_loop(); });
}

void receiver_seat::stop() {
  if (stopped_.exchange(true)) return;
  {
    // Whichever thread holds the seat leaves its poll; the other sees stopped_.
    std::lock_guard lock(mutex_);
    if (receiver_.joinable()) ring_("x");
  }
  cv_.notify_all();
  if (standby_.joinable()) standby_.join();
  if (receiver_.joinable()) receiver_.join();
}

void receiver_seat::receive_loop() {
  {
    std::lock_guard lock(mutex_);
    receiver_id_ = std::this_thread::get_id();
  }
  // Wake now and then while handshakes wait for the head, to refuse those it never answers.
  while (poll_(std::chrono::milliseconds(-1))) {
    if (lend_.wanted.load(std::memory_order_acquire)) lend_seat();
    run_posted();
  }
}

void receiver_seat::post(std::function<void()> work) {
  std::lock_guard lock(mutex_);
  if (stopped_) return;
  if (work_.running) {
    // The receiver thread runs work (the standby may hold the seat): this runs after it.
    work_.deferred.push_back(std::move(work));
    return;
  }
  posted_.push_back(std::move(work));
  if (!post_rung_) {
    post_rung_ = true;
    ring_("p");  // the poller leaves its poll, and the receive loop runs it
  }
}

void receiver_seat::run_posted() {
  std::deque<std::function<void()>> posted;
  {
    std::lock_guard lock(mutex_);
    if (posted_.empty()) return;
    posted.swap(posted_);
    post_rung_ = false;
  }
  for (auto& work : posted) {
    // As work a message handed over (from inside a poll, which run_on_receiver leaves).
    const poller inside(*this);
    run_on_receiver(std::move(work));
  }
}

void receiver_seat::lend_seat() {
  std::unique_lock lock(mutex_);
  if (!lend_.wanted || lend_.lent) return;
  lend_.lent = true;
  lend_.parked_since = std::chrono::steady_clock::now();
  cv_.notify_all();
  // Back once parked (lent, no borrower) for park_limit, or at the stop once the borrower
  // has left (its poll sees the stop).
  for (;;) {
    if (lend_.borrowed) {
      // Told when it is given back: a long get costs this thread no wake meanwhile.
      lend_.awaiting_return = true;
      cv_.wait(lock, [&] { return !lend_.borrowed; });
      lend_.awaiting_return = false;
      continue;
    }
    if (lend_.wanted) {  // lent, and the borrower not woken yet
      cv_.wait_for(lock, park_limit);
      continue;
    }
    const auto back_at = lend_.parked_since + park_limit;
    if (stopped_ || std::chrono::steady_clock::now() >= back_at) break;
    cv_.wait_until(lock, back_at);
  }
  lend_.lent = false;
  lend_.wanted = false;
}

bool receiver_seat::receive_until(const std::function<bool()>& done,
                                  std::chrono::steady_clock::time_point until) {
  if (!opts_.lend_seat || opts_.standby_receiver) return false;
  {
    std::unique_lock lock(mutex_);
    // One borrower at a time: another receives, or is about to.
    if (stopped_ || lend_.borrowed || lend_.wanted || receiver_id_ == std::thread::id{} ||
        std::this_thread::get_id() == receiver_id_) {
      return false;
    }
    if (!lend_.lent) {
      lend_.wanted = true;
      lend_.woken_while_wanted = false;
      // The receiver leaves its poll and lends the seat (while the request is still out,
      // mostly: off the reply's path).
      ring_("g");
      // Until the deadline, and no longer than it takes the receiver thread to receive
      // what this thread waits for (wake_receiving says so): then this thread has nothing
      // to receive, and the caller looks at what it waits for.
      auto lent = [&] {
        return (lend_.lent && !lend_.borrowed) || lend_.woken_while_wanted || stopped_.load();
      };
      if (until == std::chrono::steady_clock::time_point::max()) {
        cv_.wait(lock, lent);
      } else {
        cv_.wait_until(lock, until, lent);
      }
      if (!lend_.lent || lend_.borrowed || stopped_) {
        // Not lent (yet): withdrawn. A receiver thread that lends it now finds no one and
        // takes it back after park_limit.
        lend_.wanted = false;
        return false;
      }
    }
    lend_.borrowed = true;  // lent just now, or parked since an earlier wait
    lend_.wanted = false;
  }
  // Bounded slices: a wake lost to a race costs a slice, never the whole wait.
  constexpr auto slice = std::chrono::milliseconds(20);
  while (!done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) break;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now);
    if (!poll_(std::min<std::chrono::milliseconds>(left, slice))) break;  // stopping
  }
  std::lock_guard lock(mutex_);
  lend_.borrowed = false;
  lend_.parked_since = std::chrono::steady_clock::now();
  // Parked: a get soon after takes it again; the receiver takes it back after park_limit.
  if (lend_.awaiting_return) cv_.notify_all();
  return true;
}

void receiver_seat::wake_receiving() {
  std::lock_guard lock(mutex_);
  if (stopped_) return;
  if (lend_.borrowed) {
    // One word until the borrower reads: a burst of fills costs one wake, not one each.
    if (!woken_.exchange(true, std::memory_order_acq_rel)) ring_("w");
  } else if (lend_.wanted) {
    lend_.woken_while_wanted = true;  // still waiting for the seat: what it waits for is here
    cv_.notify_all();
  }
}

void receiver_seat::run_on_receiver(std::function<void()> work) {
  std::unique_lock lock(mutex_);
  if (std::this_thread::get_id() != receiver_id_) {
    // The standby holds the seat while the receiver runs earlier work: after that.
    work_.deferred.push_back(std::move(work));
    return;
  }
  // The receiver thread holds the seat now, and frees it for the work; only once: while it
  // runs deferred work the seat stays as it is (free, or taken by the standby, which keeps
  // it until reclaimed below). Freeing it again there let both threads poll the socket.
  bool release = true;
  for (;;) {
    if (release) {
      work_.seat_free = true;
      release = false;
      pollers_.fetch_sub(1, std::memory_order_acq_rel);  // called inside poll_: out of it
    }
    work_.running = true;
    work_.since = std::chrono::steady_clock::now();
    if (opts_.standby_receiver && !work_.standby_armed) {
      work_.standby_armed = true;
      cv_.notify_all();
    }
    lock.unlock();
    work();
    lock.lock();
    if (!work_.deferred.empty()) {
      work = std::move(work_.deferred.front());
      work_.deferred.pop_front();
      continue;
    }
    work_.running = false;
    work_.ended = std::chrono::steady_clock::now();
    if (!work_.seat_free) {
      // The standby took the seat: it leaves its poll and gives it back.
      work_.reclaim = true;
      if (!stopped_) ring_("r");
      cv_.wait(lock, [&] { return work_.seat_free || stopped_.load(); });
      work_.reclaim = false;
    }
    work_.seat_free = false;  // the receiver thread's again
    if (pollers_.fetch_add(1, std::memory_order_acq_rel) != 0) overlaps_.fetch_add(1);
    if (work_.deferred.empty()) return;
    work = std::move(work_.deferred.front());
    work_.deferred.pop_front();
    release = true;
  }
}

void receiver_seat::receiver_waits() {
  if (!opts_.standby_receiver) return;
  std::lock_guard lock(mutex_);
  if (!work_.running || !work_.seat_free || std::this_thread::get_id() != receiver_id_) return;
  work_.since = std::chrono::steady_clock::time_point{};  // due now
  work_.standby_armed = true;
  cv_.notify_all();
}

void receiver_seat::standby_loop() {
  std::unique_lock lock(mutex_);
  // Disarmed after this long without work: it sleeps until the next work starts.
  constexpr auto disarm_after = std::chrono::milliseconds(50);
  while (!stopped_) {
    if (!work_.standby_armed) {
      cv_.wait(lock, [&] { return work_.standby_armed || stopped_.load(); });
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (work_.running && work_.seat_free) {
      const auto due = work_.since + opts_.standby_after;
      if (now < due) {
        cv_.wait_until(lock, due);
        continue;
      }
      // The work runs long: receive meanwhile, until the receiver wants the seat back.
      work_.seat_free = false;
      lock.unlock();
      bool more = true;
      while (more && !work_.reclaim) more = poll_(std::chrono::milliseconds(-1));
      lock.lock();
      work_.seat_free = true;
      cv_.notify_all();
      continue;
    }
    if (!work_.running && now - work_.ended >= disarm_after) {
      work_.standby_armed = false;
      continue;
    }
    // The receiver holds the seat between works: look again a little later.
    cv_.wait_for(lock, opts_.standby_after);
  }
}

} // namespace celer
