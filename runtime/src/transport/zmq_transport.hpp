#pragma once
// Cluster-mode transport: protocol messages between processes over ZeroMQ.
//
// Each process binds one ROUTER socket (its endpoint, "tcp://host:port", with "#job=<id>"
// for a job's process) and receives every message for its components there; a receiver
// thread decodes each message and hands it to the component through local_transport. To
// send, a process keeps one DEALER socket per peer endpoint, guarded by a mutex, and sends
// from the caller's thread (no hand-off). Addresses whose endpoint is empty or this
// process's own go straight to local_transport.
//
// Every connection authenticates in ZeroMQ's handshake, before any message is read
// (credentials.hpp says which keys): with encryption on (the default) by CURVE, each side
// proving its key and everything after encrypted; with it off by PLAIN, the secret sent in
// clear. A ZAP handler on the receiver thread decides: the cluster key is "the cluster"
// (head, node); a job's key is that job's (driver, worker). Anything else is refused in the
// handshake and its connection closed, so a peer without keys never has a message decoded
// and holds one file descriptor until the handshake times out. Every message then carries
// the identity ZAP gave its connection (a reconnect authenticates again by itself), and is
// admitted only as admission.hpp says (who may send it; a job only for itself).
//
// A node meets a job's key before it knows the job: it asks the head (the key authority,
// which learns each job when its driver registers it) and answers the handshake when the
// head replies, or refuses it after a second. A job's process asks the head the same about
// a key not its job's: the head answers only for a job it may meet (a shared namespace's
// job and the jobs let into that namespace: namespace_grants.hpp), and the process then
// takes that job's messages marked `shared` in messages.def, nothing else. It connects to
// such a job's process with the key the head vouched for, or the one a namespace job's
// endpoint gives ("#job=<hex>&key=<hex>").
//
// Frames on a connection (DEALER -> ROUTER):
//   ['M' + destination id (16 bytes) + message frame, bulk...]   a protocol message (wire.hpp):
//                           one frame, one CURVE box, for a message without bulk values
//   ['H', hello]            version check, and a driver registering its job (cluster only)
//   ['K', public key, reply endpoint]      node or job's process -> head: whose key is this?
//                                          (a job's: its reply endpoint is its own job's)
//   ['k', public key, job id or empty]     head -> asker: the answer (cluster only)
// and back (ROUTER -> DEALER), to a hello only: ['A'] accepted, ['R', reason] refused.

#include "transport/credentials.hpp"
#include "transport/job_keys.hpp"
#include "transport/namespace_grants.hpp"
#include "transport/local_transport.hpp"
#include "transport/peer_table.hpp"
#include "transport/rate_limited_log.hpp"
#include "transport/receiver_seat.hpp"
#include "transport/transport.hpp"

#include <celer/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace zmq {
class context_t;
class socket_t;
} // namespace zmq

namespace celer {

class zmq_transport final : public transport {
public:
  struct options {
    /// Where to listen: "tcp://host:port", or "tcp://host:*" for a free port.
    std::string bind;
    /// Who this process is, and its keys.
    credentials creds;
    /// Largest message accepted (body and bulk frames together); larger ones are refused
    /// unread.
    std::size_t max_body_bytes = 256u << 20;
    /// CURVE (authenticated and encrypted); false uses PLAIN (authenticated, in clear).
    bool encrypt = true;
    /// The head endpoint, asked whose a job key is (a node's, and a job's process's, which
    /// may meet a shared namespace's job); empty: this process decides alone (the head).
    std::string key_authority;
    /// Largest single frame: ZeroMQ applies it before the handshake too, so it bounds what a
    /// peer without keys can make this process hold (per connection, for the handshake
    /// timeout). A message's frames are each below it (inline values and store chunks are
    /// a few MiB at most); its whole is max_body_bytes.
    std::size_t max_frame_bytes = 16u << 20;
    /// Connections kept open to other processes; past it the one used least recently is
    /// closed (its queued messages still flush; a later send opens it again). Processes
    /// die and are replaced: a long-lived process would otherwise keep a socket to each
    /// one it ever answered, and reach ZeroMQ's limit of 1,023 sockets.
    std::size_t max_peers = 512;
    /// A second receiving thread that takes over while the receiver thread runs work
    /// handed to run_on_receiver() for longer than standby_after (a worker process's: its
    /// tasks run on the receiver thread).
    bool standby_receiver = false;
    std::chrono::microseconds standby_after{2000};
    /// A thread waiting for what a message brings may receive itself (receive_until): a
    /// driver's get takes its reply off the socket, one hand-off fewer. Not with
    /// standby_receiver.
    bool lend_seat = false;
  };
  struct counters {
    std::uint64_t delivered = 0;
    std::uint64_t handshakes_accepted = 0;
    std::uint64_t handshakes_refused = 0;
    /// Handshakes that failed before ZAP was asked (wrong server key: no token, or a wrong
    /// one; another mechanism; garbage).
    std::uint64_t handshakes_failed = 0;
    std::uint64_t permission_denied = 0;
    std::uint64_t malformed = 0;
    std::uint64_t undeliverable = 0;
    /// Times a thread began to poll while another polled (a bug in the seat's hand-overs:
    /// always 0).
    std::uint64_t seat_overlaps = 0;
  };

  /// Binds; throws celer::exception(unavailable) when the endpoint cannot be bound.
  zmq_transport(local_transport& local, options o);
  ~zmq_transport() override;
  zmq_transport(const zmq_transport&) = delete;
  zmq_transport& operator=(const zmq_transport&) = delete;

  /// This process's endpoint as peers reach it: "tcp://host:port".
  [[nodiscard]] const std::string& endpoint() const noexcept { return endpoint_; }
  /// Messages from the wire for `id` are handled by `handler` on the receiver thread itself,
  /// one hand-off fewer than through the component's mailbox. For handlers that never block
  /// (a core_worker's). Call before start().
  void handle_directly(const unique_id& id, std::function<void(protocol::message&)> handler);
  /// Starts the receiver thread (bind the local components first).
  void start();
  /// From a handler (on the thread receiving now): runs `work` on the receiver thread with
  /// the socket free meanwhile, so that a call needs no hand-off to another thread; with
  /// standby_receiver, a second thread receives while `work` runs past standby_after.
  /// Called on the standby thread, `work` waits until the receiver thread finishes what
  /// it runs, and runs there after it: work always runs on the receiver thread, in order.
  void run_on_receiver(std::function<void()> work);
  /// Runs `work` on the receiver thread as run_on_receiver does, from any thread (another
  /// thread's event: a value a worker's parked coroutine call awaits came). Not with
  /// lend_seat (a borrower does not run it).
  void post_to_receiver(std::function<void()> work);
  /// The work run_on_receiver runs is about to wait for a message (a get): the standby
  /// takes the seat now rather than after standby_after. Any thread (a no-op elsewhere).
  void receiver_waits();
  /// With lend_seat, on a thread that waits for what a message will bring (not the receiver
  /// thread, nor inside a handler): takes the seat from the receiver thread and receives and
  /// handles messages on this thread until `done()` or `until`, then gives it back. False,
  /// at once, when it cannot have the seat (another thread has it lent, or the transport is
  /// stopping): the caller waits as it otherwise would. `done` is called without any lock
  /// of the transport's. wake_receiving() makes the borrower look at `done` again.
  bool receive_until(const std::function<bool()>& done, std::chrono::steady_clock::time_point until);
  /// Wakes the thread in receive_until (something it waits for happened on another
  /// thread). Any thread; a spurious wake costs that thread one look at `done`.
  void wake_receiving();
  /// Stops receiving, flushes what is queued for peers (boundedly) and closes every socket.
  void stop();

  [[nodiscard]] bool send(const address& to, protocol::message&& m) override;
  /// To another process: encodes `m` as it is (no copy).
  [[nodiscard]] bool send_copy(const address& to, const protocol::message& m) override;
  /// Connections open to other processes now (tests, metrics).
  [[nodiscard]] std::size_t peer_count() const;
  void forget(const std::string& endpoint) override;

  /// What `probe` does when the TCP connection is refused (nothing listens there): go on
  /// retrying it until the timeout (a node started before its head joins once the head
  /// binds), or fail at once (`celer status`: say at once that no head runs there).
  enum class when_refused : bool { keep_trying, fail };
  /// Says hello to `endpoint` on a fresh connection and waits for the answer: unauthenticated
  /// when the handshake is refused (wrong token, or encryption on one side only),
  /// failed_precondition for another protocol version, unavailable when nothing answers
  /// within `timeout` ("nothing answers at ENDPOINT" when every connection was refused), or
  /// at the first refused connection with when_refused::fail. A driver's probe of the head
  /// also registers its job there.
  expected<void> probe(const std::string& endpoint, std::chrono::milliseconds timeout,
                       when_refused refused = when_refused::keep_trying);
  /// The head's transport: job `job`'s key is accepted from now on (its driver registered
  /// it, or the head started the job itself), and the job is let into `namespaces`
  /// (namespace_grants; none when empty, "*" every one).
  void register_job(const job_id& job, std::vector<std::string> namespaces = {});
  /// The head's: namespace_grants::may_enter.
  [[nodiscard]] bool may_enter(const job_id& job, const std::string& name_space) const override;
  /// The head's: namespace_job(name_space)'s key is accepted, and it meets the jobs let in.
  void host_namespace(const std::string& name_space) override;
  /// Forgets job `job`'s key: the head refuses it, and answers a node that asks "no job".
  void job_ended(const job_id& job) override;
  /// The jobs whose keys this process accepts now (the head's: registered and not ended).
  /// Any thread.
  [[nodiscard]] std::vector<job_id> accepted_jobs() const;

  [[nodiscard]] counters stats() const;

private:
  /// send to another process: encodes `m` and queues the frames on its peer socket.
  [[nodiscard]] bool send_encoded(const address& to, const protocol::message& m);
  /// The connection to `endpoint`, opened if need be (null when it cannot be); held by the
  /// caller while it sends, so that closing it elsewhere waits for the send.
  std::shared_ptr<zmq_peer> peer_for(const std::string& endpoint);
  /// Polls once (`timeout` -1: until something arrives) and handles what is ready; false
  /// once stopping. The seat holder only.
  bool poll_once(std::chrono::milliseconds timeout);
  /// `owners[i]` keeps `parts[i + 2]` (a bulk frame) alive, or is null.
  void on_frames(std::vector<std::string_view>& parts, const char* user_id,
                 std::span<const std::shared_ptr<const void>> owners);
  void on_hello(const std::string& rid, std::string_view frame, const peer_identity* who);
  void on_zap();
  void on_event();
  void answer_zap(const zap_request& r, const std::optional<peer_identity>& who,
                  const std::string& why);
  void on_key_answer(std::string_view key, std::string_view job);
  void expire_key_lookups();
  void reply(const std::string& routing_id, char kind, const std::string& text);
  void connect_options(zmq::socket_t& s, const std::string& endpoint, bool as_cluster);

  local_transport& local_;
  options opts_;
  std::string endpoint_;
  std::unique_ptr<zmq::context_t> ctx_;
  std::unique_ptr<zmq::socket_t> router_;  // used by the receiver thread only
  std::unique_ptr<zmq::socket_t> wake_rx_, wake_tx_;
  std::unique_ptr<zmq::socket_t> zap_;     // the ZAP handler's socket; receiver thread only
  std::unique_ptr<zmq::socket_t> events_;  // the router's failed handshakes; receiver thread
  std::atomic<bool> stopped_{false};
  /// Which thread polls router_, zap_, events_ and wake_rx_ now (receiver_seat.hpp); it
  /// rings on wake_tx_.
  receiver_seat seat_;

  peer_table peers_{opts_.max_peers};

  // Receiver thread only (direct_ is fixed before start()).
  std::unordered_map<unique_id, std::function<void(protocol::message&)>> direct_;
  /// The identity of the last User-Id seen (almost every message repeats the last one).
  peer_identity_cache identities_;
  /// Handshakes waiting for the key authority's answer, by the key they present.
  key_lookups key_lookups_;
  rate_limited_log refusals_{"transport"};

  /// Job keys this process accepts; a node's forgets them past a bound (and asks again).
  job_key_table job_keys_{/*forgetful=*/!opts_.key_authority.empty()};
  /// The head's: who is let into which shared namespace, and the namespaces it hosts.
  namespace_grants grants_;

  /// What stats() reports, counted as it happens (any thread).
  struct {
    std::atomic<std::uint64_t> delivered{0}, accepted{0}, refused{0}, failed{0}, denied{0},
      malformed{0}, undeliverable{0};
  } count_;
};

/// A fresh cluster token: 64 hex digits from the kernel's random source.
std::string make_token();

} // namespace celer
