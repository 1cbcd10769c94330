// Who an HTTP request speaks for (auth.hpp).
#include "http/auth.hpp"

#include <sodium.h>

#include <algorithm>
#include <cctype>
#include <sstream>

namespace celer::http {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool same(const key32& a, const key32& b) { return sodium_memcmp(a.data(), b.data(), a.size()) == 0; }

auth_verdict refused(int status, std::string message) { return {.status = status, .who = std::nullopt, .message = std::move(message)}; }

} // namespace

std::string principal::describe() const { return admin ? "the admin" : "job " + job.short_hex(); }

authenticator::authenticator(credentials cluster, std::function<std::vector<job_id>()> jobs,
                             std::shared_ptr<session_store> sessions)
  : cluster_(std::move(cluster)), jobs_(std::move(jobs)), sessions_(std::move(sessions)) {}

namespace {

constexpr const char* sessions_table = "http_sessions";

/// What the store keys a session by: BLAKE2b-256 of its id, hex. A lookup compares hashes,
/// so its timing says nothing of the id's bytes, and the tables on disk hold no usable id.
std::string hashed_id(std::string_view id) {
  key32 h{};
  crypto_generichash(h.data(), h.size(), reinterpret_cast<const unsigned char*>(id.data()), id.size(), nullptr, 0);
  return key_hex(h);
}

std::int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

} // namespace

session_store::session_store(std::chrono::seconds ttl, std::shared_ptr<store::table_db> db)
  : ttl_(ttl), db_(std::move(db)) {
  if (!db_) return;
  // Rows are "admin <expires ms>" or "job <job hex> <expires ms>"; expired or unreadable
  // ones are dropped.
  const auto now = std::chrono::system_clock::now();
  std::vector<std::string> stale;
  (void)db_->scan(sessions_table, [&](std::string_view key, std::string_view value) {
    std::istringstream in{std::string(value)};
    std::string kind, job;
    std::int64_t expires = 0;
    in >> kind;
    if (kind == "job") in >> job;
    in >> expires;
    entry e{.who = {.admin = kind == "admin", .job = {}},
            .expires = std::chrono::system_clock::time_point(std::chrono::milliseconds(expires))};
    auto parsed = job_id::parse(job);
    if (kind == "job" && parsed) e.who.job = *parsed;
    if (!in || (kind != "admin" && !(kind == "job" && parsed)) || e.expires <= now) {
      stale.emplace_back(key);
      return;
    }
    sessions_.emplace(std::string(key), e);
  });
  for (const auto& k : stale) (void)db_->erase(sessions_table, k);
}

std::string session_store::open(const principal& who) {
  key32 id{};
  randombytes_buf(id.data(), id.size());
  auto hex = key_hex(id);
  const auto now = std::chrono::system_clock::now();
  const auto expires = now + ttl_;
  const auto key = hashed_id(hex);
  std::lock_guard lock(m_);
  std::vector<std::string> expired;
  for (const auto& [k, e] : sessions_)
    if (e.expires <= now) expired.push_back(k);
  for (const auto& k : expired) forget(k);
  sessions_[key] = {who, expires};
  if (db_) {
    const std::string row = (who.admin ? std::string("admin ") : "job " + who.job.hex() + " ") + std::to_string(unix_ms(expires));
    (void)db_->put(sessions_table, key, row);  // kept in memory whatever the disk says
  }
  return hex;
}

std::optional<principal> session_store::find(std::string_view id) {
  const auto key = hashed_id(id);
  std::lock_guard lock(m_);
  const auto it = sessions_.find(key);
  if (it == sessions_.end()) return std::nullopt;
  if (it->second.expires <= std::chrono::system_clock::now()) {
    forget(key);
    return std::nullopt;
  }
  return it->second.who;
}

void session_store::close(std::string_view id) {
  std::lock_guard lock(m_);
  forget(hashed_id(id));
}

void session_store::forget(const std::string& hashed) {
  sessions_.erase(hashed);
  if (db_) (void)db_->erase(sessions_table, hashed);
}

std::string csrf_token(std::string_view session_id) {
  const std::string input = "celer-csrf-v1:" + std::string(session_id);
  key32 t{};
  crypto_generichash(t.data(), t.size(), reinterpret_cast<const unsigned char*>(input.data()), input.size(), nullptr, 0);
  return key_hex(t);
}

auth_verdict authenticator::check(std::string_view authorization, std::string_view cookie,
                                  std::string_view cookie_name) const {
  authorization = trim(authorization);
  if (!authorization.empty()) {
    constexpr std::string_view bearer = "Bearer ";
    if (authorization.size() <= bearer.size() || authorization.substr(0, bearer.size()) != bearer)
      return refused(401, "the Authorization header must be 'Bearer <credential>'");
    return check_credential(trim(authorization.substr(bearer.size())));
  }
  const auto from_cookie = cookie_value(cookie, cookie_name);
  if (!from_cookie.empty()) {
    auto who = sessions_->find(from_cookie);
    if (!who) return refused(401, "the session has ended: log in again");
    if (!who->admin) {
      const auto running = jobs_ ? jobs_() : std::vector<job_id>{};
      if (std::find(running.begin(), running.end(), who->job) == running.end())
        return refused(403, "the session's job has ended");
    }
    return {.status = 200, .who = *who, .message = {}};
  }
  return refused(401, "a credential is needed: 'Authorization: Bearer <token>' (the cluster's token, or a job's "
                      "credential), or log in to the dashboard");
}

auth_verdict authenticator::check_credential(std::string_view presented) const {
  if (presented.empty()) return refused(403, "the credential is empty");
  // Every comparison runs, matched or not, so the time says nothing about which (if any).
  // The admin presents the cluster's token: it is compared as the transport keeps it, hashed
  // (credentials::for_cluster), so the server needs no copy of the token itself.
  bool admin = false;
  if (cluster_.holds_cluster_secret()) {
    key32 hashed{};
    crypto_generichash(hashed.data(), hashed.size(), reinterpret_cast<const unsigned char*>(presented.data()),
                       presented.size(), reinterpret_cast<const unsigned char*>("celer-token-v1"), 14);
    if (auto secret = key_from_hex(cluster_.plain_password(/*as_cluster=*/true)); secret) admin = same(hashed, *secret);
  }
  // A job's credential is 64 hex digits (CELER_JOB_CREDENTIAL in its processes).
  std::optional<job_id> job;
  const auto key = key_from_hex(presented);
  for (const auto& j : jobs_ ? jobs_() : std::vector<job_id>{}) {
    auto secret = cluster_.job_secret_hex(j);
    if (!secret) continue;
    auto k = key_from_hex(*secret);
    if (key && k && same(*key, *k) && !job) job = j;
  }
  if (admin) return {.status = 200, .who = principal{.admin = true, .job = {}}, .message = {}};
  if (job) return {.status = 200, .who = principal{.admin = false, .job = *job}, .message = {}};
  return refused(403, "the credential matches neither the cluster's token nor a running job's");
}

std::string cookie_value(std::string_view cookie_header, std::string_view name) {
  while (!cookie_header.empty()) {
    const auto end = cookie_header.find(';');
    auto part = trim(cookie_header.substr(0, end));
    cookie_header = end == std::string_view::npos ? std::string_view{} : cookie_header.substr(end + 1);
    const auto eq = part.find('=');
    if (eq != std::string_view::npos && trim(part.substr(0, eq)) == name) return std::string(trim(part.substr(eq + 1)));
  }
  return {};
}

} // namespace celer::http
