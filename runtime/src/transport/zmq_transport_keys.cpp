// Who may connect to a zmq_transport (zmq_transport.hpp): its ZAP handler, which ZeroMQ asks
// about each handshake (PLAIN's password or CURVE's key: the cluster's, this job's, a job key
// this process has learnt, or one it asks the head about), and the job keys it accepts.
#include "transport/zmq_transport.hpp"

#include "log.hpp"
#include "transport/zmq_peer.hpp"

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <chrono>
#include <string>
#include <string_view>

namespace celer {
namespace {

std::string key_bytes(const key32& k) { return std::string(reinterpret_cast<const char*>(k.data()), k.size()); }

} // namespace

void zmq_transport::register_job(const job_id& job, std::vector<std::string> namespaces) {
  auto key = opts_.creds.job_public(job);
  if (!key) return;
  job_keys_.add(key_bytes(*key), job);
  if (!namespaces.empty()) grants_.grant(job, std::move(namespaces));
}

bool zmq_transport::may_enter(const job_id& job, const std::string& name_space) const {
  return grants_.may_enter(job, name_space);
}

void zmq_transport::host_namespace(const std::string& name_space) {
  grants_.host(name_space);
  register_job(namespace_job(name_space));
}

void zmq_transport::job_ended(const job_id& job) {
  grants_.forget(job);
  auto key = opts_.creds.job_public(job);
  if (!key) return;
  job_keys_.erase(key_bytes(*key));
}

std::vector<job_id> zmq_transport::accepted_jobs() const { return job_keys_.jobs(); }

void zmq_transport::on_zap() {
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(*zap_, std::back_inserter(frames), zmq::recv_flags::dontwait)) return;
  // [routing..., "", "1.0", request id, domain, address, identity, mechanism, credentials...]
  std::size_t empty = 0;
  while (empty < frames.size() && frames[empty].size() != 0) ++empty;
  if (empty + 7 > frames.size()) return;  // not a ZAP request (ZeroMQ's own: cannot happen)
  zap_request r;
  for (std::size_t i = 0; i <= empty; ++i) r.envelope.push_back(frames[i].to_string());
  r.request_id = frames[empty + 2].to_string();
  r.since = std::chrono::steady_clock::now();
  const std::string address = frames[empty + 4].to_string();
  const std::string mechanism = frames[empty + 6].to_string();
  const auto& creds = opts_.creds;
  if (mechanism == "PLAIN" && !opts_.encrypt && frames.size() >= empty + 9) {
    auto who = creds.check_plain(frames[empty + 7].to_string_view(), frames[empty + 8].to_string_view());
    answer_zap(r, who, "from " + address + ": wrong credentials");
    return;
  }
  if (mechanism != "CURVE" || !opts_.encrypt || frames.size() < empty + 8 ||
      frames[empty + 7].size() != 32) {
    answer_zap(r, std::nullopt,
               "from " + address + ": it spoke " + mechanism +
                 (opts_.encrypt ? " (this cluster encrypts: set the same encryption knob)"
                                : " (this cluster does not encrypt: set the same encryption knob)"));
    return;
  }
  const std::string key = frames[empty + 7].to_string();
  if (key == key_bytes(creds.cluster_public())) {
    answer_zap(r, peer_identity{peer_role::cluster, {}}, "");
    return;
  }
  if (creds.identity().role == peer_role::job && key == key_bytes(creds.public_key())) {
    answer_zap(r, creds.identity(), "");
    return;
  }
  // The head's and a node's: the job keys they know; a job's process's: the keys of the
  // jobs the head let it meet. Else, with a key authority, ask it.
  if (auto job = job_keys_.find(key)) {
    answer_zap(r, peer_identity{peer_role::job, *job}, "");
    return;
  }
  if (!opts_.key_authority.empty()) {
    if (key_lookups_.full()) {
      answer_zap(r, std::nullopt, "from " + address + ": too many handshakes wait for the head");
      return;
    }
    if (key_lookups_.wait(key, std::move(r))) {
      // Ask the head on the connection to it (the answer comes back to this endpoint).
      if (auto head = peer_for(opts_.key_authority)) {
        std::lock_guard lock(head->mutex);
        head->socket.send(zmq::str_buffer("K"), zmq::send_flags::sndmore);
        head->socket.send(zmq::buffer(key), zmq::send_flags::sndmore);
        head->socket.send(zmq::buffer(endpoint_), zmq::send_flags::none);
      }
    }
    return;
  }
  answer_zap(r, std::nullopt, "from " + address + ": an unknown key");
}

void zmq_transport::answer_zap(const zap_request& r, const std::optional<peer_identity>& who,
                               const std::string& why) {
  if (who) {
    ++count_.accepted;
  } else {
    ++count_.refused;
    refusals_.warn("refused a connection " + why);
  }
  try {
    for (const auto& f : r.envelope) zap_->send(zmq::buffer(f), zmq::send_flags::sndmore);
    zap_->send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
    zap_->send(zmq::buffer(r.request_id), zmq::send_flags::sndmore);
    zap_->send(who ? zmq::str_buffer("200") : zmq::str_buffer("400"), zmq::send_flags::sndmore);
    zap_->send(who ? zmq::str_buffer("OK") : zmq::str_buffer("refused"), zmq::send_flags::sndmore);
    const std::string user = who ? who->user_id() : std::string();
    zap_->send(zmq::buffer(user), zmq::send_flags::sndmore);
    zap_->send(zmq::str_buffer(""), zmq::send_flags::none);
  } catch (const zmq::error_t&) {
    // The connection gave up waiting; nothing to answer.
  }
}

void zmq_transport::on_key_answer(std::string_view key, std::string_view job) {
  const auto waiting = key_lookups_.answered(key);
  if (waiting.empty()) return;
  std::optional<peer_identity> who;
  if (auto j = job_id::parse(job); j && !j->nil()) {
    // The head is trusted to say whose key it is; the key is checked against the job where
    // this process can derive it (head and nodes), and taken on the head's word where it
    // cannot (a job's process meeting another job: the head said they may meet).
    auto k = opts_.creds.job_public(*j);
    if (k ? key == key_bytes(*k) : opts_.creds.identity().role == peer_role::job && *j != opts_.creds.identity().job) {
      job_keys_.add(std::string(key), *j);
      who = peer_identity{peer_role::job, *j};
    }
  }
  for (const auto& r : waiting) answer_zap(r, who, "presenting a key the head does not know");
}

void zmq_transport::expire_key_lookups() {
  for (const auto& r : key_lookups_.expired(std::chrono::steady_clock::now())) {
    answer_zap(r, std::nullopt, "presenting a job key: the head did not say whose in time");
  }
}

} // namespace celer
