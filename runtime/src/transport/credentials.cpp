#include "transport/credentials.hpp"

#include <sodium.h>

#include <cstring>
#include <mutex>

namespace celer {
namespace {

void init_sodium() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (sodium_init() < 0) throw exception(error_code::internal, "libsodium cannot initialise");
  });
}

/// BLAKE2b-256 of `label` and `extra`, keyed with `key`.
key32 derive(const key32& key, std::string_view label, std::string_view extra = {}) {
  key32 out{};
  crypto_generichash_state st;
  crypto_generichash_init(&st, key.data(), key.size(), out.size());
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(label.data()), label.size());
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(extra.data()), extra.size());
  crypto_generichash_final(&st, out.data(), out.size());
  return out;
}

std::pair<key32, key32> seed_keypair(const key32& seed) {
  std::pair<key32, key32> kp;
  crypto_box_seed_keypair(kp.first.data(), kp.second.data(), seed.data());
  return kp;
}

key32 job_secret_of(const key32& cluster_secret, const job_id& job) {
  return derive(cluster_secret, "celer/job/v1", job.bytes());
}

bool equal32(const key32& a, const key32& b) { return sodium_memcmp(a.data(), b.data(), 32) == 0; }

constexpr std::string_view job_suffix = "#job=";
constexpr std::string_view key_suffix = "&key=";

} // namespace

std::string peer_identity::user_id() const {
  return role == peer_role::cluster ? std::string("cluster") : "job:" + job.hex();
}

std::optional<peer_identity> peer_identity::parse(std::string_view user_id) {
  if (user_id == "cluster") return peer_identity{peer_role::cluster, {}};
  if (user_id.size() == 36 && user_id.substr(0, 4) == "job:") {
    auto j = job_id::parse(user_id.substr(4));
    if (j && !j->nil()) return peer_identity{peer_role::job, *j};
  }
  return std::nullopt;
}

std::string peer_identity::describe() const {
  return role == peer_role::cluster ? std::string("the cluster") : "job " + job.short_hex();
}

std::string key_hex(const key32& k) {
  char out[65];
  sodium_bin2hex(out, sizeof out, k.data(), k.size());
  return std::string(out, 64);
}

std::optional<key32> key_from_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  key32 k{};
  std::size_t len = 0;
  if (sodium_hex2bin(k.data(), k.size(), hex.data(), hex.size(), nullptr, &len, nullptr) != 0 ||
      len != 32) {
    return std::nullopt;
  }
  return k;
}

expected<credentials> credentials::for_cluster(std::string_view token) {
  init_sodium();
  if (token.empty()) return error(error_code::invalid_argument, "the cluster token is empty");
  credentials c;
  key32 secret{};
  crypto_generichash(secret.data(), secret.size(), reinterpret_cast<const unsigned char*>(token.data()),
                     token.size(), reinterpret_cast<const unsigned char*>("celer-token-v1"), 14);
  c.cluster_secret_ = secret;
  auto [pub, sec] = seed_keypair(derive(secret, "celer/cluster/v1"));
  c.public_ = pub;
  c.secret_ = sec;
  c.cluster_public_ = pub;
  c.identity_ = {peer_role::cluster, {}};
  return c;
}

expected<credentials> credentials::for_driver(std::string_view token, const job_id& job) {
  auto c = for_cluster(token);
  if (!c) return c;
  if (job.nil()) return error(error_code::invalid_argument, "a driver needs a job id");
  c->job_secret_ = job_secret_of(*c->cluster_secret_, job);
  auto [pub, sec] = seed_keypair(derive(c->job_secret_, "celer/job-key/v1"));
  c->public_ = pub;
  c->secret_ = sec;
  c->identity_ = {peer_role::job, job};
  return c;
}

expected<credentials> credentials::for_job(const job_id& job, std::string_view job_secret_hex,
                                           std::string_view cluster_public_hex) {
  init_sodium();
  auto js = key_from_hex(job_secret_hex);
  auto cp = key_from_hex(cluster_public_hex);
  if (job.nil() || !js || !cp) {
    return error(error_code::invalid_argument,
                 "a job credential is a job id, a 64-hex-digit job secret and the cluster's "
                 "64-hex-digit public key");
  }
  credentials c;
  c.job_secret_ = *js;
  auto [pub, sec] = seed_keypair(derive(*js, "celer/job-key/v1"));
  c.public_ = pub;
  c.secret_ = sec;
  c.cluster_public_ = *cp;
  c.identity_ = {peer_role::job, job};
  return c;
}

std::string credentials::cluster_public_hex() const { return key_hex(cluster_public_); }

expected<key32> credentials::job_public(const job_id& job) const {
  if (identity_.role == peer_role::job && identity_.job == job) return public_;
  if (cluster_secret_) {
    return seed_keypair(derive(job_secret_of(*cluster_secret_, job), "celer/job-key/v1")).first;
  }
  return error(error_code::permission_denied,
               "job " + identity_.job.short_hex() + " cannot reach a process of job " +
                 job.short_hex() + ": jobs are isolated from each other");
}

expected<std::string> credentials::job_secret_hex(const job_id& job) const {
  if (!cluster_secret_) {
    return error(error_code::permission_denied, "only head and nodes can issue job credentials");
  }
  return key_hex(job_secret_of(*cluster_secret_, job));
}

expected<std::pair<key32, key32>> credentials::cluster_keypair() const {
  if (!cluster_secret_) {
    return error(error_code::permission_denied, "this process does not hold the cluster secret");
  }
  return seed_keypair(derive(*cluster_secret_, "celer/cluster/v1"));
}

std::string credentials::plain_password(bool as_cluster) const {
  if ((as_cluster || identity_.role == peer_role::cluster) && cluster_secret_) {
    return key_hex(*cluster_secret_);
  }
  return key_hex(job_secret_);
}

std::optional<peer_identity> credentials::check_plain(std::string_view user_id,
                                                      std::string_view password) const {
  auto who = peer_identity::parse(user_id);
  auto given = key_from_hex(password);
  if (!who || !given) return std::nullopt;
  if (who->role == peer_role::cluster) {
    // Whoever knows the cluster's public key can check a claimed secret against it (a
    // worker holds the key, not the secret).
    if (equal32(seed_keypair(derive(*given, "celer/cluster/v1")).first, cluster_public_)) return who;
    return std::nullopt;
  }
  if (cluster_secret_) {
    if (equal32(*given, job_secret_of(*cluster_secret_, who->job))) return who;
    return std::nullopt;
  }
  if (identity_.role == peer_role::job && who->job == identity_.job &&
      equal32(*given, job_secret_)) {
    return who;
  }
  return std::nullopt;
}

job_id namespace_job(std::string_view name_space) {
  init_sodium();
  constexpr std::string_view label = "celer/namespace/v1";
  unsigned char out[16];
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, sizeof out);
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(label.data()), label.size());
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(name_space.data()), name_space.size());
  crypto_generichash_final(&st, out, sizeof out);
  out[0] = 0xce;  // the mark is_namespace_job looks for
  out[1] = 0x1e;
  return job_id(*unique_id::from_bytes(std::string_view(reinterpret_cast<const char*>(out), sizeof out)));
}

bool is_namespace_job(const job_id& job) noexcept { return (job.hi >> 48) == 0xce1e; }

std::string job_endpoint(const std::string& tcp_endpoint, const job_id& job, const std::optional<key32>& key) {
  std::string out = tcp_endpoint + std::string(job_suffix) + job.hex();
  if (key) out += std::string(key_suffix) + key_hex(*key);
  return out;
}

expected<endpoint_parts> split_endpoint(std::string_view endpoint) {
  const auto at = endpoint.find('#');
  if (at == std::string_view::npos) return endpoint_parts{std::string(endpoint), {}, {}};
  std::string_view rest = endpoint.substr(at);
  std::optional<key32> key;
  if (const auto k = rest.find(key_suffix); k != std::string_view::npos) {
    key = key_from_hex(rest.substr(k + key_suffix.size()));
    rest = rest.substr(0, k);
    if (!key) rest = {};  // malformed
  }
  auto j = rest.size() > job_suffix.size() ? job_id::parse(rest.substr(job_suffix.size())) : std::nullopt;
  if (rest.substr(0, job_suffix.size()) != job_suffix || !j || j->nil()) {
    return error(error_code::invalid_argument,
                 "malformed endpoint '" + std::string(endpoint.substr(0, 80)) +
                   "' (expected tcp://host:port or tcp://host:port#job=<32 hex digits>, then "
                   "perhaps &key=<64 hex digits>)");
  }
  return endpoint_parts{std::string(endpoint.substr(0, at)), *j, key};
}

} // namespace celer
