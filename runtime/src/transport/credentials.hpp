#pragma once
// Who a process is on the cluster's wire, and the keys that prove it.
//
// A cluster has one secret (the token: 64 hex digits from `celer start --head`). Everything
// else is derived from it with keyed BLAKE2b, so nothing but the secret has to be stored:
//
//   cluster keypair  = seed_keypair(H(secret, "celer/cluster/v1"))     head and nodes
//   job J's secret   = H(secret, "celer/job/v1" || J)                  the job's credential
//   job J's keypair  = seed_keypair(H(job secret, "celer/job-key/v1"))  J's driver and workers
//
// Head and nodes hold the secret and so can derive any job's keys; a worker gets only its
// job's secret (and the cluster's public key, to reach head and nodes), never the cluster's.
// The keys are Curve25519 keypairs, used by ZeroMQ's CURVE mechanism as both the server key
// of a process's listening socket and the client key of its connections.
//
//   auto head = credentials::for_cluster(token);                  // head, node
//   auto driver = credentials::for_driver(token, job);            // acts as job J
//   auto worker = credentials::for_job(job, head->job_secret(job), head->cluster_public_hex());

#include <celer/error.hpp>
#include <celer/ids.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace celer {

using key32 = std::array<unsigned char, 32>;

/// What an authenticated connection speaks for.
enum class peer_role : std::uint8_t {
  cluster,  ///< the head or a node agent (holds the cluster secret)
  job,      ///< the driver or a worker of one job (holds that job's credential)
};

/// The identity ZeroMQ's ZAP handler gave a connection; every message carries it.
struct peer_identity {
  peer_role role = peer_role::cluster;
  job_id job;  ///< the job, for role job
  /// The ZAP user id: "cluster", or "job:" and 32 hex digits.
  [[nodiscard]] std::string user_id() const;
  /// Parses user_id(); nullopt for anything else.
  static std::optional<peer_identity> parse(std::string_view user_id);
  /// "the cluster", "job 5f0c1a2b".
  [[nodiscard]] std::string describe() const;
  friend bool operator==(const peer_identity&, const peer_identity&) = default;
};

/// The identity of the last ZAP user id parsed: almost every message repeats the last one,
/// so a run of messages from one connection parses it once. One thread's (the receiver's).
class peer_identity_cache {
public:
  /// The identity of `user_id`; null when there is none (a null or unparsable user id).
  [[nodiscard]] const peer_identity* of(const char* user_id) {
    if (user_id == nullptr || last_ != user_id) {
      last_ = user_id == nullptr ? "" : user_id;
      identity_ = peer_identity::parse(last_);
    }
    return identity_ ? &*identity_ : nullptr;
  }

private:
  std::string last_;
  std::optional<peer_identity> identity_;
};

class credentials {
public:
  /// The head's or a node's: the cluster secret itself. invalid_argument if `token` is empty.
  static expected<credentials> for_cluster(std::string_view token);
  /// A driver started by someone holding the secret: it speaks as job `job` (its messages
  /// are checked as the job's) but can register that job with the head.
  static expected<credentials> for_driver(std::string_view token, const job_id& job);
  /// A worker's: its job's credential and the cluster's public key (both hex, as
  /// job_secret_hex() and cluster_public_hex() write them).
  static expected<credentials> for_job(const job_id& job, std::string_view job_secret_hex,
                                       std::string_view cluster_public_hex);

  /// What this process speaks as.
  [[nodiscard]] const peer_identity& identity() const noexcept { return identity_; }
  /// This process's own keypair (its server key and its client key).
  [[nodiscard]] const key32& public_key() const noexcept { return public_; }
  [[nodiscard]] const key32& secret_key() const noexcept { return secret_; }
  [[nodiscard]] const key32& cluster_public() const noexcept { return cluster_public_; }
  [[nodiscard]] std::string cluster_public_hex() const;
  /// True for head, nodes and drivers: they can derive every job's keys.
  [[nodiscard]] bool holds_cluster_secret() const noexcept { return cluster_secret_.has_value(); }

  /// Job `job`'s public key: derived (holders of the secret), this process's own (its job),
  /// else permission_denied (a job's process cannot reach another job's).
  [[nodiscard]] expected<key32> job_public(const job_id& job) const;
  /// Job `job`'s credential in hex, for the workers a node starts. Holders of the secret
  /// only (permission_denied otherwise).
  [[nodiscard]] expected<std::string> job_secret_hex(const job_id& job) const;
  /// The cluster keypair (holders of the secret only: head, nodes, and a driver's
  /// registration of its job).
  [[nodiscard]] expected<std::pair<key32, key32>> cluster_keypair() const;

  /// The password a connection presents when encryption is off (ZeroMQ PLAIN): the cluster
  /// secret (`as_cluster`, holders only), or the job's credential, in hex.
  [[nodiscard]] std::string plain_password(bool as_cluster = false) const;
  /// Checks a PLAIN user id and password in constant time: the identity they prove, or
  /// nullopt.
  [[nodiscard]] std::optional<peer_identity> check_plain(std::string_view user_id,
                                                         std::string_view password) const;

  /// No keys: connects to nothing and accepts nothing (until assigned real credentials).
  credentials() = default;

private:
  peer_identity identity_;
  key32 public_{}, secret_{}, cluster_public_{};
  std::optional<key32> cluster_secret_;  // the 32-byte cluster secret
  key32 job_secret_{};                   // role job only
};

/// 64 lowercase hex digits, and back (nullopt unless exactly 64 hex digits).
std::string key_hex(const key32& k);
std::optional<key32> key_from_hex(std::string_view hex);

/// The job a shared namespace's detached actors run as (actor_options::lifetime): derived
/// from the name alone, so that head and nodes agree on it and a restarted head finds it
/// again; its keys are derived as any job's. Jobs the head lets into the namespace meet
/// that job's processes (zmq_transport, namespace_grants.hpp).
job_id namespace_job(std::string_view name_space);
/// Whether `job` has the shape namespace_job gives (a random job id has it once in 65,536:
/// it only makes the process publish its public key in its endpoint, which is harmless).
bool is_namespace_job(const job_id& job) noexcept;

/// Where a job's process listens: its endpoint carries the job so that head, nodes and the
/// job's other processes know which key it answers with ("tcp://10.0.0.2:4711#job=<hex>").
/// With `key` (a namespace job's processes), also its public key
/// ("...#job=<hex>&key=<64 hex>"), for the jobs that meet it and cannot derive it.
std::string job_endpoint(const std::string& tcp_endpoint, const job_id& job,
                         const std::optional<key32>& key = std::nullopt);
/// Splits an endpoint into what ZeroMQ connects to, the job it names (nil for head and
/// nodes) and the public key it gives, if any. invalid_argument for a malformed suffix.
struct endpoint_parts {
  std::string tcp;
  job_id job;
  std::optional<key32> key;
};
expected<endpoint_parts> split_endpoint(std::string_view endpoint);

} // namespace celer
