#pragma once
// Who an HTTP request speaks for (docs/dashboard.md, "Credentials"). Every method of every
// endpoint needs a credential: the cluster's token (the admin: it sees and does everything)
// or one job's credential (it sees and stops only its own job), given as
// `Authorization: Bearer <64 hex digits>` or in the dashboard's session cookie. Missing:
// 401; present but matching nothing: 403. The comparison is in constant time, and nothing
// else of the request (User-Agent, Origin, the client's address) counts.
//
//   http::authenticator a(creds, [&] { return known_jobs(); });
//   auto v = a.check(req.get_header_value("Authorization"), req.get_header_value("Cookie"));
//   if (v.status != 200) ...reply v.status with v.message...
//   if (v.who->admin) ... else ... v.who->job ...

#include "transport/credentials.hpp"

#include <celer/store/table_db.hpp>

#include <celer/ids.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace celer::http {

struct principal {
  /// The cluster's token: everything.
  bool admin = false;
  /// Otherwise the job whose credential it is.
  job_id job;
  /// "the admin", "job 5f0c1a2b".
  [[nodiscard]] std::string describe() const;
};

struct auth_verdict {
  /// 200, 401 (no credential) or 403 (a credential that matches nothing).
  int status = 200;
  std::optional<principal> who;
  /// What a refusal says (never the credential).
  std::string message;
};

/// The stem of the dashboard's session cookie's name (HttpOnly, SameSite=Strict): the
/// server names it `celer_session_<port>` (`__Host-celer_session_<port>` under TLS), so
/// that two heads on one host keep cookies of their own.
inline constexpr std::string_view session_cookie = "celer_session";

/// The dashboard's CSRF token for a session: derived from the session's id (BLAKE2b keyed
/// by it), so nothing more is stored, and unknown to anyone who does not hold the cookie.
/// The page carries it; a cookie-authenticated POST/PUT/PATCH/DELETE sends it back in
/// X-CSRF-Token (or, for the logout form, the field `csrf`). 64 hex digits.
[[nodiscard]] std::string csrf_token(std::string_view session_id);

/// The dashboard's logins: a random 256-bit session id (the cookie's value) for each, so
/// that the token never sits in a browser's cookie jar. Sessions end at `ttl` or logout.
/// Only a hash of each id is kept (and looked up: no timing of the id's own bytes), in
/// memory and, given `db`, in the head's tables (table "http_sessions"), so that a head
/// started again on them keeps its browsers logged in. Thread-safe.
class session_store {
public:
  explicit session_store(std::chrono::seconds ttl = std::chrono::hours(12), std::shared_ptr<store::table_db> db = nullptr);
  /// A new session for `who`: its id, 64 hex digits.
  [[nodiscard]] std::string open(const principal& who);
  /// The principal of a live session, or nothing (unknown or expired).
  [[nodiscard]] std::optional<principal> find(std::string_view id);
  void close(std::string_view id);
  [[nodiscard]] std::chrono::seconds ttl() const noexcept { return ttl_; }

private:
  struct entry {
    principal who;
    std::chrono::system_clock::time_point expires;
  };
  void forget(const std::string& hashed);
  std::chrono::seconds ttl_;
  std::shared_ptr<store::table_db> db_;
  std::mutex m_;
  /// By the hash of the session id (hashed_id in auth.cpp).
  std::map<std::string, entry, std::less<>> sessions_;
};

class authenticator {
public:
  /// `cluster`: credentials that hold the cluster secret (the head's). `jobs`: the jobs
  /// whose credentials are accepted now (those the head knows and that have not ended);
  /// called per request, from the server's threads.
  authenticator(credentials cluster, std::function<std::vector<job_id>()> jobs,
                std::shared_ptr<session_store> sessions = std::make_shared<session_store>());

  /// The verdict for a request's Authorization header and Cookie header (either may be
  /// empty; `cookie_name` the session cookie's name). A Bearer credential wins over the
  /// cookie, whose value must be a live session
  /// (a job's only while the job runs).
  [[nodiscard]] auth_verdict check(std::string_view authorization, std::string_view cookie,
                                   std::string_view cookie_name = session_cookie) const;
  /// The credential in `presented` (64 hex digits), as check does for a Bearer one.
  [[nodiscard]] auth_verdict check_credential(std::string_view presented) const;

  [[nodiscard]] session_store& sessions() const noexcept { return *sessions_; }

private:
  credentials cluster_;
  std::function<std::vector<job_id>()> jobs_;
  std::shared_ptr<session_store> sessions_;
};

/// The value of cookie `name` in a Cookie header ("a=1; celer_session=..."), or empty.
[[nodiscard]] std::string cookie_value(std::string_view cookie_header, std::string_view name);

} // namespace celer::http
