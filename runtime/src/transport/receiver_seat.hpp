#pragma once
// The seat of a receiving transport: which one thread polls its sockets now.
//
// ZeroMQ sockets are not thread-safe, so one thread at a time "holds the seat": polls and
// handles what arrives. Three threads take turns at it, never at once:
//   - the receiver thread, which holds it unless it lends it;
//   - the standby (options::standby_receiver), which takes it while the receiver thread runs
//     work handed to run_on_receiver() for longer than standby_after (a worker process runs
//     its tasks there), and gives it back when that work ends;
//   - a borrower (options::lend_seat): a thread waiting for what a message brings (a
//     driver's get) asks for the seat in receive_until() and takes its reply off the socket
//     itself, one hand-off fewer. Given back, the seat stays parked for park_limit, so that a
//     next get takes it again without waking the receiver thread.
//
// The seat knows nothing of sockets: it polls through `poll` and wakes the seat holder
// through `ring`, both the transport's (zmq_transport.hpp). Words rung: "g" a thread wants
// the seat, "r" the receiver wants it back, "w" a borrower should look at `done` again, "p"
// work was posted (post), "x" stop. The poller, on reading the doorbell, calls heard_wake(), and leaves its drain when
// reclaim_wanted().
//
// Threads and locks: mutex_ guards every plain field below and every call of `ring`; it is
// never held while `poll` or work runs. The atomics are read by the poller without it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace celer {

class receiver_seat {
public:
  struct options {
    /// A second receiving thread takes the seat while run_on_receiver's work runs longer
    /// than standby_after.
    bool standby_receiver = false;
    std::chrono::microseconds standby_after{2000};
    /// receive_until may lend the seat to a waiting thread (not with standby_receiver).
    bool lend_seat = false;
  };
  /// Polls the sockets once (timeout -1: until something arrives) and handles what is
  /// ready; false once the transport stops. Called by the seat holder only.
  using poll_fn = std::function<bool(std::chrono::milliseconds)>;
  /// Rings the seat holder's doorbell with a one-letter word; never blocks (a doorbell, not
  /// a queue). Called with mutex_ held.
  using ring_fn = std::function<void(const char*)>;

  receiver_seat(options o, poll_fn poll, ring_fn ring);
  ~receiver_seat();
  receiver_seat(const receiver_seat&) = delete;
  receiver_seat& operator=(const receiver_seat&) = delete;

  /// Starts the receiver thread (and the standby's, with standby_receiver).
  void start();
  /// Makes whichever thread holds the seat leave its poll, and joins the threads. The
  /// transport says it stops before (its poll returns false from then on).
  void stop();

  /// See zmq_transport::run_on_receiver.
  void run_on_receiver(std::function<void()> work);
  /// See zmq_transport::post_to_receiver.
  void post(std::function<void()> work);
  /// See zmq_transport::receiver_waits.
  void receiver_waits();
  /// See zmq_transport::receive_until.
  bool receive_until(const std::function<bool()>& done, std::chrono::steady_clock::time_point until);
  /// See zmq_transport::wake_receiving.
  void wake_receiving();

  // For the poller (the seat holder), without the mutex.
  /// The doorbell was read: a "w" rung from now on is unread.
  void heard_wake() noexcept { woken_.store(false, std::memory_order_release); }
  /// The receiver thread wants the seat back from the standby: leave the drain.
  [[nodiscard]] bool reclaim_wanted() const noexcept { return work_.reclaim.load(); }
  /// Counts the polling threads while it lives: two at once is a bug, counted in overlaps().
  class poller {
  public:
    explicit poller(receiver_seat& s) noexcept : seat_(s) { seat_.enter_poll(); }
    ~poller() { seat_.pollers_.fetch_sub(1, std::memory_order_acq_rel); }
    poller(const poller&) = delete;
    poller& operator=(const poller&) = delete;

  private:
    receiver_seat& seat_;
  };
  /// Times a thread began to poll while another polled (always 0).
  [[nodiscard]] std::uint64_t overlaps() const noexcept { return overlaps_.load(); }

private:
  void enter_poll() noexcept {
    if (pollers_.fetch_add(1, std::memory_order_acq_rel) != 0) overlaps_.fetch_add(1);
  }
  void receive_loop();
  void standby_loop();
  /// The receiver thread, when it sees lend_.wanted: lends the seat and waits for it back.
  void lend_seat();
  /// The receiver thread, between polls: runs the work posted meanwhile.
  void run_posted();

  const options opts_;
  const poll_fn poll_;
  const ring_fn ring_;
  std::thread receiver_, standby_;
  std::atomic<bool> stopped_{false};

  std::mutex mutex_;
  std::condition_variable cv_;
  std::thread::id receiver_id_;
  /// The standby's side: work handed to run_on_receiver runs on the receiver thread, and
  /// the standby takes the seat while it runs long.
  struct working {
    /// No thread holds the seat (the receiver runs work; the standby may take it).
    bool seat_free = false;
    /// The receiver thread runs work, since `since`; the standby checks on it while armed.
    bool running = false;
    bool standby_armed = false;
    std::chrono::steady_clock::time_point since, ended;
    /// The receiver wants the seat back from the standby (read by the poller unlocked).
    std::atomic<bool> reclaim{false};
    /// Work handed to run_on_receiver on the standby thread, for the receiver to run next.
    std::deque<std::function<void()>> deferred;
  } work_;
  /// Work posted from other threads while the receiver polled (rung "p" once until taken).
  std::deque<std::function<void()>> posted_;
  bool post_rung_ = false;

  /// The borrower's side: a thread wants the seat (one at a time, receive_until); the
  /// receiver thread has lent it; a borrower receives now. Lent and not borrowed, the seat
  /// is parked since parked_since: a thread that waits again soon (a driver's next get)
  /// takes it with no wake of the receiver, which takes it back after park_limit.
  struct lending {
    std::atomic<bool> wanted{false};
    bool lent = false;
    bool borrowed = false;
    /// The receiver thread sleeps until the borrower gives the seat back (it is told).
    bool awaiting_return = false;
    /// wake_receiving came while a thread waited for the seat to be lent (it stops waiting).
    bool woken_while_wanted = false;
    std::chrono::steady_clock::time_point parked_since;
  } lend_;
  static constexpr std::chrono::microseconds park_limit{1000};
  /// A "w" was rung and not yet read: the next wake_receiving rings no other.
  std::atomic<bool> woken_{false};
  /// Threads inside poll now (at most 1), and how often there were two.
  std::atomic<int> pollers_{0};
  std::atomic<std::uint64_t> overlaps_{0};
};

} // namespace celer
