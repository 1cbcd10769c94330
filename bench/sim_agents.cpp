// Simulated node agents (sim_agents.hpp): one event loop drives them all.
#include "sim_agents.hpp"

#include "cluster/head_join.hpp"
#include "protocol/head_watch.hpp"
#include "cluster/session.hpp"
#include "config/knobs.hpp"
#include "protocol/messages.hpp"
#include "transport/admission.hpp"
#include "transport/credentials.hpp"
#include "transport/wire.hpp"
#include "worker/task_inbox.hpp"

#include <celer/version.hpp>

#include <nlohmann/json.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace celer::bench {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::size_t id_bytes = 16;
constexpr const char* zap_endpoint = "inproc://zeromq.zap.01";

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// One simulated node agent: its sockets, its resources and what it lent.
struct sim_agent {
  int index = 0;
  node_id id = node_id::random();
  address self;
  std::unique_ptr<zmq::socket_t> router;
  /// The hello before joining (a connection of its own, as a node's probe is), tried again
  /// with backoff and jitter while the head does not answer, as a node's is (head_join.hpp).
  std::unique_ptr<zmq::socket_t> probe;
  std::optional<head_join> join;
  /// When it first says hello (its place in the join window), when this attempt began and
  /// how long it may wait, and when to try again after one went unanswered.
  clock_type::time_point start_at, first_hello, probe_sent, retry_at;
  std::chrono::milliseconds probe_within{0};
  bool started = false, retrying = false;
  bool joined = false, failed = false, gone = false, silent = false;
  /// Connections to the head and to the owners it answers, by endpoint.
  std::unordered_map<std::string, std::unique_ptr<zmq::socket_t>> peers;
  protocol::resource_set total, available;
  /// What it lent: a lease to a task owner, or an actor's worker (by worker id).
  struct lent {
    task_id request;
    address owner;
    job_id job;
    protocol::resource_set held;
    bool actor = false;
    actor_id actor_of;
    /// The tasks pushed to this worker, in order, as a worker process holds them: the real
    /// worker's inbox, so that an owner's withdraw_tasks takes back exactly what has not run.
    std::unique_ptr<task_inbox> inbox = std::make_unique<task_inbox>();
  };
  std::unordered_map<worker_id, lent> workers;
  std::deque<protocol::task_spec> queued;
  clock_type::time_point next_beat, last_beat;
  std::optional<head_watch> watch;
};

class sim_process {
public:
  sim_process(const sim_agents_options& o, const knob_values& k, credentials creds)
    : o_(o), k_(k), creds_(std::move(creds)), ctx_(1, 65536) {
    auto kp = creds_.cluster_keypair();
    if (!kp) throw exception(kp.error().code(), kp.error().message());
    std::tie(public_, secret_) = *kp;
    beat_every_ = std::chrono::milliseconds(std::max(10, k.heartbeat_ms));
    max_body_ = static_cast<std::size_t>(k.max_message_bytes);
    zap_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::router);
    zap_->set(zmq::sockopt::linger, 0);
    zap_->bind(zap_endpoint);
  }

  int run();

private:
  // ---- sockets
  std::unique_ptr<zmq::socket_t> make_router();
  std::unique_ptr<zmq::socket_t> make_dealer(const std::string& endpoint);
  zmq::socket_t* peer(sim_agent& a, const std::string& endpoint);
  void send(sim_agent& a, const address& to, const protocol::message& m);
  // ---- joining and heartbeats
  void start_probe(sim_agent& a);
  void on_probe_reply(sim_agent& a);
  /// Starts, times out and retries the agents' hellos due at `now`; whether any is pending.
  bool step_joins(clock_type::time_point now);
  void join(sim_agent& a);
  void beat(sim_agent& a, clock_type::time_point now);
  // ---- what arrives
  void on_zap();
  void drain(sim_agent& a);
  void on_frames(sim_agent& a, std::vector<zmq::message_t>& parts);
  /// `to`: the component addressed (the agent itself, or a worker it lent).
  void handle(sim_agent& a, const unique_id& to, protocol::message& m);
  void on_withdraw(sim_agent& a, const worker_id& w, protocol::withdraw_tasks& m);
  /// Runs the tasks waiting in the inboxes of workers woken since the last call.
  void run_ready();
  void dispatch(sim_agent& a);
  void release(sim_agent& a, const worker_id& w);
  void echo(sim_agent& a, protocol::task_spec& spec);
  void learn_job(const job_id& job);
  // ---- control
  bool on_control();
  void rebuild_poll();
  nlohmann::json stats() const;

  sim_agents_options o_;
  knob_values k_;
  credentials creds_;
  key32 public_{}, secret_{};
  std::chrono::milliseconds beat_every_{500};
  std::size_t max_body_ = 256u << 20;
  zmq::context_t ctx_;
  std::unique_ptr<zmq::socket_t> zap_;
  std::vector<std::unique_ptr<sim_agent>> agents_;
  /// Workers whose inbox woke them (deliver() said so): their tasks run after this drain.
  std::vector<std::pair<sim_agent*, worker_id>> ready_;
  std::unordered_map<node_id, sim_agent*> by_id_;
  /// Public keys of the jobs whose processes may connect (learnt from their work).
  std::unordered_map<std::string, job_id> job_keys_;
  std::unordered_set<job_id> jobs_seen_;
  std::vector<zmq_pollitem_t> items_;
  /// For each poll item past the first two (stdin, ZAP): its agent, and whether it is the
  /// agent's probe rather than its listening socket.
  std::vector<std::pair<sim_agent*, bool>> owners_;
  bool poll_dirty_ = true;
  std::string control_buffer_;
  bool joined_reported_ = false;
  clock_type::time_point started_ = clock_type::now();
  std::mt19937_64 rng_{std::random_device{}()};
  /// What stats() reports.
  struct {
    std::uint64_t heartbeats = 0, probes = 0, leases_granted = 0, leases_returned = 0,
                  leases_cancelled = 0, tasks_answered = 0, actors_started = 0, actors_stopped = 0,
                  refused = 0, malformed = 0, false_deaths = 0, zap_accepted = 0, zap_refused = 0,
                  hellos = 0, hellos_unanswered = 0, withdraws = 0, tasks_given_back = 0;
    std::size_t most_queued = 0;
  } count_;
  /// Each joined agent's time from its first hello to the answer, ms.
  std::vector<double> join_ms_;
  std::map<std::string, std::uint64_t> received_;
};

std::unique_ptr<zmq::socket_t> sim_process::make_router() {
  // As zmq_transport's listening socket: CURVE server with the cluster's key, ZAP asked.
  auto s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::router);
  s->set(zmq::sockopt::linger, 0);
  s->set(zmq::sockopt::sndhwm, 0);
  s->set(zmq::sockopt::rcvhwm, 1000);
  s->set(zmq::sockopt::handshake_ivl, 5000);
  s->set(zmq::sockopt::zap_domain, "celer");
  s->set(zmq::sockopt::curve_server, true);
  s->set(zmq::sockopt::curve_secretkey, zmq::const_buffer(secret_.data(), 32));
  s->set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(16u << 20));
  s->bind("tcp://" + o_.ip + ":*");
  return s;
}

std::unique_ptr<zmq::socket_t> sim_process::make_dealer(const std::string& endpoint) {
  // As zmq_transport's connections of a node: its (the cluster's) keypair as client key; the
  // server's key is the cluster's, or a job's for a job's process.
  auto parts = split_endpoint(endpoint);
  if (!parts) throw exception(parts.error().code(), parts.error().message());
  key32 server = public_;
  if (!parts->job.nil()) {
    auto k = creds_.job_public(parts->job);
    if (!k) throw exception(k.error().code(), k.error().message());
    server = *k;
  }
  auto s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  s->set(zmq::sockopt::linger, 1000);
  s->set(zmq::sockopt::sndhwm, 0);
  s->set(zmq::sockopt::rcvhwm, 16);
  s->set(zmq::sockopt::reconnect_ivl_max, 2000);
  s->set(zmq::sockopt::curve_serverkey, zmq::const_buffer(server.data(), 32));
  s->set(zmq::sockopt::curve_publickey, zmq::const_buffer(public_.data(), 32));
  s->set(zmq::sockopt::curve_secretkey, zmq::const_buffer(secret_.data(), 32));
  s->connect(parts->tcp);
  return s;
}

zmq::socket_t* sim_process::peer(sim_agent& a, const std::string& endpoint) {
  auto it = a.peers.find(endpoint);
  if (it != a.peers.end()) return it->second.get();
  try {
    return a.peers.emplace(endpoint, make_dealer(endpoint)).first->second.get();
  } catch (const std::exception& e) {
    std::cerr << "agent " << a.index << ": cannot connect to " << endpoint << ": " << e.what() << "\n";
    return nullptr;
  }
}

void sim_process::send(sim_agent& a, const address& to, const protocol::message& m) {
  auto* s = peer(a, to.endpoint);
  if (s == nullptr) return;
  auto frames = wire::encode(m, "M" + to.id.bytes());
  for (std::size_t i = 0; i < frames.size(); ++i) {
    (void)s->send(zmq::buffer(frames[i]),
                  i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

void sim_process::start_probe(sim_agent& a) {
  // As zmq_transport::probe: a fresh connection says hello and waits for the answer.
  a.probe = make_dealer(o_.head);
  a.probe->set(zmq::sockopt::linger, 0);
  const wire::hello h{std::string(wire::magic), protocol_version, {}, a.self.endpoint};
  const std::string hello = wire::encode_hello(h);
  (void)a.probe->send(zmq::str_buffer("H"), zmq::send_flags::sndmore);
  (void)a.probe->send(zmq::buffer(hello), zmq::send_flags::none);
  a.probe_sent = clock_type::now();
  a.probe_within = a.join->attempt_timeout(a.probe_sent);
  a.retrying = false;
  ++count_.hellos;
  poll_dirty_ = true;
}

bool sim_process::step_joins(clock_type::time_point now) {
  bool pending = false;
  for (auto& ap : agents_) {
    auto& a = *ap;
    if (!a.started && a.start_at <= now) {
      // Its place in the join window has come: its first hello.
      a.started = true;
      a.first_hello = now;
      head_join::config c;
      c.head = o_.head;
      c.attempt_timeout = std::chrono::milliseconds(std::max(1, k_.connect_timeout_ms));
      c.give_up_after = std::chrono::milliseconds(std::max(0, k_.node_head_timeout_ms));
      c.give_up_knob = "node_head_timeout_ms";
      a.join.emplace(c, now, rng_());
      start_probe(a);
    } else if (a.retrying && a.retry_at <= now) {
      start_probe(a);
    } else if (a.probe && now - a.probe_sent >= a.probe_within) {
      // No answer in time: the same as a node's probe (zmq_transport::probe), then its retry.
      a.probe.reset();
      poll_dirty_ = true;
      ++count_.hellos_unanswered;
      auto s = a.join->failed(now, error(error_code::unavailable,
                                         "no celer process answered at " + o_.head + " within " +
                                           std::to_string(a.probe_within.count()) + " ms"));
      if (s.give_up) {
        a.failed = true;
        std::cerr << "agent " << a.index << ": cannot join: " << s.why << "\n";
      } else {
        a.retrying = true;
        a.retry_at = s.retry_at;
        std::cerr << "agent " << a.index << ": " << s.say << "\n";
      }
    }
    pending = pending || !a.started || a.probe != nullptr || a.retrying;
  }
  return pending;
}

void sim_process::on_probe_reply(sim_agent& a) {
  std::vector<zmq::message_t> parts;
  if (!zmq::recv_multipart(*a.probe, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
  const std::string kind = parts.empty() ? "" : parts[0].to_string();
  a.probe.reset();
  poll_dirty_ = true;
  if (kind != "A") {  // refused: not tried again (head_join retries only silence)
    a.failed = true;
    std::cerr << "agent " << a.index << ": the head refused its hello: "
              << (parts.size() > 1 ? parts[1].to_string() : kind) << "\n";
    return;
  }
  join_ms_.push_back(ms_between(a.first_hello, clock_type::now()));
  join(a);
}

void sim_process::join(sim_agent& a) {
  protocol::register_node r;
  r.protocol_version = protocol_version;
  r.node = a.id;
  r.node_address = a.self;
  r.total = a.total;
  send(a, address{cluster::head_component, o_.head}, r);
  a.joined = true;
  head_watch::config hw;
  hw.head = o_.head;
  hw.missing_after = std::chrono::milliseconds(std::max(1, k_.node_timeout_ms));
  hw.give_up_after = std::chrono::milliseconds(std::max(0, k_.node_head_timeout_ms));
  hw.give_up_knob = "node_head_timeout_ms";
  a.watch.emplace(hw, clock_type::now());
  // A node heartbeats on its ticks: the first within one period of its start.
  std::uniform_int_distribution<long> phase(1, beat_every_.count());
  a.next_beat = clock_type::now() + std::chrono::milliseconds(phase(rng_));
}

void sim_process::beat(sim_agent& a, clock_type::time_point now) {
  a.next_beat += beat_every_;
  if (a.next_beat < now) a.next_beat = now + beat_every_;
  if (a.silent || a.gone) return;
  // As node_agent::on(tick): probe the head when due, then the heartbeat.
  auto s = a.watch->tick(now);
  if (s.probe) {
    send(a, address{cluster::head_component, o_.head}, head_watch::probe(a.self));
    ++count_.probes;
  }
  if (s.give_up) {
    a.gone = true;
    std::cerr << "agent " << a.index << ": " << s.why << "\n";
    return;
  }
  protocol::heartbeat h;
  h.node = a.id;
  h.available = a.available;
  h.queued = static_cast<std::uint32_t>(a.queued.size());
  h.workers = static_cast<std::uint32_t>(a.workers.size());
  // Its "workers" live at its own endpoint.
  if (!a.workers.empty()) h.worker_endpoints.push_back(a.self.endpoint);
  send(a, address{cluster::head_component, o_.head}, h);
  a.last_beat = now;
  ++count_.heartbeats;
}

void sim_process::on_zap() {
  for (;;) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(*zap_, std::back_inserter(frames), zmq::recv_flags::dontwait)) return;
    // [routing..., "", "1.0", request id, domain, address, identity, mechanism, key]
    std::size_t empty = 0;
    while (empty < frames.size() && frames[empty].size() != 0) ++empty;
    if (empty + 7 > frames.size()) continue;
    std::optional<peer_identity> who;
    if (frames[empty + 6].to_string() == "CURVE" && frames.size() >= empty + 8 &&
        frames[empty + 7].size() == 32) {
      const std::string key = frames[empty + 7].to_string();
      if (key == std::string(reinterpret_cast<const char*>(public_.data()), 32)) {
        who = peer_identity{peer_role::cluster, {}};
      } else if (auto it = job_keys_.find(key); it != job_keys_.end()) {
        who = peer_identity{peer_role::job, it->second};
      }
    }
    ++(who ? count_.zap_accepted : count_.zap_refused);
    for (std::size_t i = 0; i <= empty; ++i) (void)zap_->send(frames[i], zmq::send_flags::sndmore);
    (void)zap_->send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
    (void)zap_->send(frames[empty + 2], zmq::send_flags::sndmore);
    (void)zap_->send(who ? zmq::str_buffer("200") : zmq::str_buffer("400"), zmq::send_flags::sndmore);
    (void)zap_->send(who ? zmq::str_buffer("OK") : zmq::str_buffer("refused"), zmq::send_flags::sndmore);
    const std::string user = who ? who->user_id() : std::string();
    (void)zap_->send(zmq::buffer(user), zmq::send_flags::sndmore);
    (void)zap_->send(zmq::str_buffer(""), zmq::send_flags::none);
  }
}

void sim_process::learn_job(const job_id& job) {
  // The job's driver connects to the workers this agent lends it: its key is let in (a real
  // node asks the head whose key it is; the agents derive it, as holders of the secret can).
  if (job.nil() || !jobs_seen_.insert(job).second) return;
  if (auto k = creds_.job_public(job)) {
    job_keys_[std::string(reinterpret_cast<const char*>(k->data()), 32)] = job;
  }
}

void sim_process::drain(sim_agent& a) {
  for (;;) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(*a.router, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    on_frames(a, parts);
  }
}

void sim_process::on_frames(sim_agent& a, std::vector<zmq::message_t>& parts) {
  if (parts.size() < 2 || parts.size() > 2 + wire::max_bulk_frames) {
    ++count_.malformed;
    return;
  }
  const std::string_view first(parts[1].data<char>(), parts[1].size());
  if (first.size() < 1 + id_bytes + 1 || first[0] != 'M') {
    ++count_.malformed;  // hellos and key lookups go to the head, never to a node
    return;
  }
  const char* user = zmq_msg_gets(parts[1].handle(), "User-Id");
  auto who = peer_identity::parse(user == nullptr ? "" : user);
  if (!who) {
    ++count_.refused;
    return;
  }
  std::vector<std::string_view> views;
  views.push_back(first.substr(1 + id_bytes));
  for (std::size_t i = 2; i < parts.size(); ++i) views.emplace_back(parts[i].data<char>(), parts[i].size());
  if (auto h = wire::peek_header(views[0]); h && !admit_type(*who, h->type)) {
    ++count_.refused;
    return;
  }
  auto m = wire::decode(views, max_body_);
  if (!m) {
    ++count_.malformed;
    return;
  }
  if (!admit(*who, *m)) {
    ++count_.refused;
    return;
  }
  ++received_[protocol::name_of(*m)];
  handle(a, unique_id::from_bytes(first.substr(1, id_bytes)).value_or(unique_id{}), *m);
}

void sim_process::echo(sim_agent& a, protocol::task_spec& spec) {
  // What a worker would send its owner: the result of the call. The simulated function
  // returns its first argument.
  protocol::task_result r;
  r.task = spec.id;
  r.attempt = spec.attempt;
  protocol::object_payload v;
  v.id = spec.return_id();
  if (!spec.args.empty() && !spec.args[0].is_ref) {
    v.ok = true;
    v.payload = std::move(spec.args[0].value);
  } else {
    v.fail = protocol::failure_info::make(
      detail::failure_kind::invalid_call, error_code::invalid_argument,
      "a simulated agent echoes its task's first argument, passed by value; this task has none",
      spec.function, a.id.short_hex());
  }
  r.returns.push_back(std::move(v));
  send(a, spec.owner, r);
  ++count_.tasks_answered;
}

void sim_process::dispatch(sim_agent& a) {
  // First come, first served, while the first fits (a real node queues by shape).
  while (!a.queued.empty() && a.available.covers(a.queued.front().resources)) {
    auto spec = std::move(a.queued.front());
    a.queued.pop_front();
    const worker_id w = worker_id::random();
    auto& l = a.workers[w];
    l.held = spec.resources;
    l.job = spec.job;
    l.owner = spec.owner;
    a.available.subtract(spec.resources);
    if (spec.kind == protocol::task_kind::actor_creation) {
      l.actor = true;
      l.actor_of = spec.actor;
      send(a, address{cluster::head_component, o_.head}, protocol::actor_started{spec.actor, address{w, a.self.endpoint}, {}, {}});
      ++count_.actors_started;
      continue;
    }
    l.request = spec.id;
    protocol::lease_reply r;
    r.request = spec.id;
    r.ok = true;
    r.worker = w;
    r.worker_addr = address{w, a.self.endpoint};
    r.node = a.id;
    r.node_addr = a.self;
    send(a, spec.owner, r);
    ++count_.leases_granted;
  }
}

void sim_process::release(sim_agent& a, const worker_id& w) {
  auto it = a.workers.find(w);
  if (it == a.workers.end()) return;
  // What was pushed to it and has not run yet runs now (an owner returns a lease when its
  // worker is idle; a cancel or a job's end may come sooner).
  while (auto m = it->second.inbox->next()) {
    if (auto* e = std::get_if<protocol::execute_task>(&*m)) echo(a, e->spec);
  }
  a.available.add(it->second.held);
  a.workers.erase(it);
}

void sim_process::on_withdraw(sim_agent& a, const worker_id& w, protocol::withdraw_tasks& m) {
  // As worker::front_door: the queued plain tasks among those named go back, each to its own
  // owner; an empty answer tells the asker that the others have run.
  ++count_.withdraws;
  std::vector<protocol::task_spec> taken;
  if (auto it = a.workers.find(w); it != a.workers.end()) taken = it->second.inbox->withdraw(m.tasks);
  if (taken.empty()) {
    send(a, m.owner, protocol::tasks_returned{w, {}, {}, {}});
    return;
  }
  count_.tasks_given_back += taken.size();
  while (!taken.empty()) {
    const address owner = taken.front().owner;
    protocol::tasks_returned back;
    back.worker = w;
    std::vector<protocol::task_spec> rest;
    for (auto& t : taken) (t.owner == owner ? back.tasks : rest).push_back(std::move(t));
    send(a, owner, back);
    taken = std::move(rest);
  }
}

void sim_process::run_ready() {
  // Each woken worker runs what its inbox holds, in order, until it is empty (next() then
  // marks it idle, so the next task pushed wakes it again).
  auto ready = std::move(ready_);
  ready_.clear();
  for (auto& [a, w] : ready) {
    auto it = a->workers.find(w);
    if (it == a->workers.end()) continue;  // released: what it held ran then
    count_.most_queued = std::max(count_.most_queued, it->second.inbox->queued());
    while (auto m = it->second.inbox->next()) {
      if (auto* e = std::get_if<protocol::execute_task>(&*m)) echo(*a, e->spec);
    }
  }
}

void sim_process::handle(sim_agent& a, const unique_id& to, protocol::message& msg) {
  std::visit(
    [&](auto& m) {
      using T = std::decay_t<decltype(m)>;
      if constexpr (std::is_same_v<T, protocol::request_lease> || std::is_same_v<T, protocol::start_actor>) {
        if (!a.joined || a.gone) return;
        learn_job(m.spec.job);
        const bool known = std::any_of(a.queued.begin(), a.queued.end(), [&](const auto& s) {
          return s.id == m.spec.id && s.actor == m.spec.actor;
        });
        if (known) return;  // a resend
        a.queued.push_back(std::move(m.spec));
        dispatch(a);
      } else if constexpr (std::is_same_v<T, protocol::execute_task>) {
        // Pipelining: an owner may push several tasks to one leased worker before the first
        // is answered. They wait in the worker's inbox and run after this drain, in order.
        const worker_id w(to);
        auto it = a.workers.find(w);
        if (it == a.workers.end()) {
          echo(a, m.spec);  // not lent now (an idle worker of the pool runs it as it comes)
          return;
        }
        protocol::message queued = std::move(m);
        switch (it->second.inbox->deliver(queued)) {
          case task_inbox::after::wake:
            ready_.emplace_back(&a, w);
            break;
          case task_inbox::after::nothing:
            break;
          case task_inbox::after::give_back:  // never: no simulated call blocks in get
            echo(a, std::get<protocol::execute_task>(queued).spec);
            break;
        }
      } else if constexpr (std::is_same_v<T, protocol::withdraw_tasks>) {
        on_withdraw(a, worker_id(to), m);
      } else if constexpr (std::is_same_v<T, protocol::return_lease>) {
        auto it = a.workers.find(m.worker);
        if (it == a.workers.end() || it->second.actor || it->second.request != m.request) return;
        release(a, m.worker);
        ++count_.leases_returned;
        dispatch(a);
      } else if constexpr (std::is_same_v<T, protocol::cancel_lease_requests>) {
        const std::unordered_set<task_id> wanted(m.requests.begin(), m.requests.end());
        std::erase_if(a.queued, [&](const protocol::task_spec& s) {
          return s.kind == protocol::task_kind::normal && s.owner == m.owner && wanted.contains(s.id);
        });
        std::vector<worker_id> back;
        for (const auto& [w, l] : a.workers) {
          if (!l.actor && l.owner == m.owner && wanted.contains(l.request)) back.push_back(w);
        }
        for (const auto& w : back) release(a, w);
        count_.leases_cancelled += back.size();
        dispatch(a);
      } else if constexpr (std::is_same_v<T, protocol::unsubscribe_cluster>) {
        std::erase_if(a.queued, [&](const protocol::task_spec& s) { return s.owner.endpoint == m.endpoint; });
        std::vector<worker_id> back;
        for (const auto& [w, l] : a.workers) {
          if (!l.actor && l.owner.endpoint == m.endpoint) back.push_back(w);
        }
        for (const auto& w : back) release(a, w);
        dispatch(a);
      } else if constexpr (std::is_same_v<T, protocol::kill_actor>) {
        std::erase_if(a.queued, [&](const protocol::task_spec& s) { return s.actor == m.actor; });
        for (const auto& [w, l] : a.workers) {
          if (l.actor && l.actor_of == m.actor) {
            release(a, w);
            ++count_.actors_stopped;
            break;
          }
        }
        dispatch(a);
      } else if constexpr (std::is_same_v<T, protocol::job_finished>) {
        std::erase_if(a.queued, [&](const protocol::task_spec& s) { return s.job == m.job; });
        std::vector<worker_id> back;
        for (const auto& [w, l] : a.workers) {
          if (l.job == m.job) back.push_back(w);
        }
        for (const auto& w : back) release(a, w);
        dispatch(a);
      } else if constexpr (std::is_same_v<T, protocol::node_died>) {
        // The head tells every live node of a death (and a dead node itself only if it speaks
        // again): the first agent here to hear of one of this process's agents reports it.
        auto it = by_id_.find(m.node);
        if (it == by_id_.end() || it->second->gone) return;
        auto& dead = *it->second;
        dead.gone = true;  // it leaves, as a node agent told it is dead does
        if (dead.silent) {
          std::cout << "dead " << dead.index << " " << ms_between(dead.last_beat, clock_type::now()) << std::endl;
        } else {
          ++count_.false_deaths;
          std::cerr << "agent " << dead.index << " was declared dead while heartbeating (its last heartbeat "
                    << ms_between(dead.last_beat, clock_type::now()) << " ms ago; at unix ms " << unix_ms()
                    << "): " << m.reason << "\n";
        }
      } else if constexpr (std::is_same_v<T, protocol::lookup_actor_reply>) {
        if (a.watch && m.request_id == head_watch::probe_request) a.watch->heard(clock_type::now());
      } else if constexpr (std::is_same_v<T, protocol::head_restarted>) {
        if (a.joined && !a.gone) join(a);
      } else if constexpr (std::is_same_v<T, protocol::resource_query>) {
        protocol::resource_reply r;
        r.request_id = m.request_id;
        r.total = a.total;
        r.available = a.available;
        send(a, m.reply_to, r);
      }
    },
    msg);
}

bool sim_process::on_control() {
  char buf[4096];
  const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
  if (n <= 0) return false;  // closed: stop
  control_buffer_.append(buf, static_cast<std::size_t>(n));
  for (auto nl = control_buffer_.find('\n'); nl != std::string::npos; nl = control_buffer_.find('\n')) {
    const std::string line = control_buffer_.substr(0, nl);
    control_buffer_.erase(0, nl + 1);
    if (line == "quit") return false;
    if (line.rfind("silence ", 0) == 0) {
      const int i = std::stoi(line.substr(8)) - o_.first;
      if (i >= 0 && static_cast<std::size_t>(i) < agents_.size()) agents_[static_cast<std::size_t>(i)]->silent = true;
    }
  }
  return true;
}

void sim_process::rebuild_poll() {
  items_.clear();
  owners_.clear();
  items_.push_back({nullptr, STDIN_FILENO, ZMQ_POLLIN, 0});
  items_.push_back({zap_->handle(), 0, ZMQ_POLLIN, 0});
  for (auto& a : agents_) {
    items_.push_back({a->router->handle(), 0, ZMQ_POLLIN, 0});
    owners_.emplace_back(a.get(), false);
    if (a->probe) {
      items_.push_back({a->probe->handle(), 0, ZMQ_POLLIN, 0});
      owners_.emplace_back(a.get(), true);
    }
  }
  poll_dirty_ = false;
}

nlohmann::json sim_process::stats() const {
  std::size_t joined = 0, failed = 0, gone = 0;
  for (const auto& a : agents_) {
    joined += a->joined ? 1 : 0;
    failed += a->failed ? 1 : 0;
    gone += a->gone ? 1 : 0;
  }
  // Each agent's time from its first hello to the head's answer.
  auto sorted = join_ms_;
  std::sort(sorted.begin(), sorted.end());
  auto at = [&](double q) {
    return sorted.empty() ? 0.0 : sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * static_cast<double>(sorted.size())))];
  };
  const nlohmann::json join{{"p50", at(0.5)}, {"p99", at(0.99)}, {"max", sorted.empty() ? 0.0 : sorted.back()}};
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  return {{"agents", agents_.size()},        {"joined", joined},
          {"failed_to_join", failed},        {"gone", gone},
          {"heartbeats", count_.heartbeats},       {"probes", count_.probes},
          {"leases_granted", count_.leases_granted}, {"leases_returned", count_.leases_returned},
          {"leases_cancelled", count_.leases_cancelled}, {"tasks_answered", count_.tasks_answered},
          {"actors_started", count_.actors_started}, {"actors_stopped", count_.actors_stopped},
          {"refused", count_.refused},             {"malformed", count_.malformed},
          {"false_deaths", count_.false_deaths},   {"zap_accepted", count_.zap_accepted},
          {"zap_refused", count_.zap_refused},     {"received", received_},
          {"cpu_seconds", cpu},              {"max_rss_kib", ru.ru_maxrss},
          {"hellos", count_.hellos},               {"hellos_unanswered", count_.hellos_unanswered},
          {"join_ms", join},                 {"withdraws", count_.withdraws},
          {"tasks_given_back", count_.tasks_given_back}, {"most_tasks_queued_per_worker", count_.most_queued}};
}

int sim_process::run() {
  for (int i = 0; i < o_.count; ++i) {
    auto a = std::make_unique<sim_agent>();
    a->index = o_.first + i;
    a->router = make_router();
    a->self = address{a->id, a->router->get(zmq::sockopt::last_endpoint)};
    a->total.set(protocol::cpu, o_.cpus);
    a->total.set("sim_node", o_.sim_node);
    a->available = a->total;
    // Its first hello at its place in the join window: all the agents of every process
    // spread evenly over it, by index.
    a->start_at = started_ + std::chrono::milliseconds(static_cast<long>(
                               static_cast<double>(o_.join_window_ms) * a->index / std::max(1, o_.total)));
    by_id_[a->id] = a.get();
    agents_.push_back(std::move(a));
  }
  for (;;) {
    if (poll_dirty_) rebuild_poll();
    auto now = clock_type::now();
    auto next = now + std::chrono::milliseconds(100);
    for (const auto& a : agents_) {
      if (a->joined && !a->gone && !a->silent) next = std::min(next, a->next_beat);
      if (!a->started) next = std::min(next, a->start_at);
      if (a->retrying) next = std::min(next, a->retry_at);
      if (a->probe) next = std::min(next, a->probe_sent + a->probe_within);
    }
    const auto wait = std::max<long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count());
    zmq::poll(items_.data(), items_.size(), std::chrono::milliseconds(wait));
    if ((items_[0].revents & ZMQ_POLLIN) != 0 && !on_control()) break;
    if ((items_[1].revents & ZMQ_POLLIN) != 0) on_zap();
    // Copied: a probe's reply changes the poll set.
    const auto owners = owners_;
    for (std::size_t i = 0; i < owners.size(); ++i) {
      if ((items_[i + 2].revents & ZMQ_POLLIN) == 0) continue;
      auto& [a, is_probe] = owners[i];
      if (is_probe) {
        if (a->probe) on_probe_reply(*a);
      } else {
        drain(*a);
      }
    }
    run_ready();
    now = clock_type::now();
    const bool waiting = !joined_reported_ && step_joins(now);
    for (auto& a : agents_) {
      if (a->joined && !a->gone && a->next_beat <= now) beat(*a, now);
    }
    if (!waiting && !joined_reported_) {
      joined_reported_ = true;
      std::size_t joined = 0, failed = 0;
      for (const auto& a : agents_) (a->joined ? joined : failed) += 1;
      std::cout << "joined " << joined << " " << failed << " " << ms_between(started_, now) << " "
                << count_.hellos_unanswered << std::endl;
    }
  }
  std::cout << "stats " << stats().dump() << std::endl;
  return 0;
}

} // namespace

int run_sim_agents(const sim_agents_options& o) {
  // A socket has a descriptor or more (its mailbox, its connections): take what the hard
  // limit allows.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  const auto k = load_knobs(0, nullptr);
  if (k.encryption == 0) {
    std::cerr << "celer-bench-sim-cluster: the simulated agents speak CURVE only (encryption=1)\n";
    return 2;
  }
  auto creds = credentials::for_cluster(o.token);
  if (!creds) {
    std::cerr << "celer-bench-sim-cluster: " << creds.error().message() << "\n";
    return 2;
  }
  try {
    sim_process p(o, k, std::move(*creds));
    return p.run();
  } catch (const std::exception& e) {
    std::cout << "error " << e.what() << std::endl;
    return 1;
  }
}

} // namespace celer::bench
