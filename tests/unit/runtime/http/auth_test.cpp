// Who an HTTP request speaks for (runtime/src/http/auth.hpp): the cluster's token is the
// admin, a running job's credential is that job, anything else is refused, 401 without a
// credential and 403 with a wrong one.
#include "http/auth.hpp"

#include "fakes/memory_table_db.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace celer;

namespace {

const std::string token(64, 'a');

credentials cluster() {
  auto c = credentials::for_cluster(token);
  REQUIRE(c.has_value());
  return *c;
}

} // namespace

TEST_CASE("the token is the admin; a running job's credential is that job; others are refused", "[http][auth]") {
  const auto running = job_id::random();
  const auto ended = job_id::random();
  const auto c = cluster();
  http::authenticator a(c, [&] { return std::vector<job_id>{running}; });

  auto v = a.check("Bearer " + token, "");
  REQUIRE(v.status == 200);
  CHECK(v.who->admin);
  CHECK(v.who->describe() == "the admin");

  auto job_credential = c.job_secret_hex(running);
  REQUIRE(job_credential.has_value());
  v = a.check("Bearer " + *job_credential, "");
  REQUIRE(v.status == 200);
  CHECK_FALSE(v.who->admin);
  CHECK(v.who->job == running);

  // A job that ended (or that the head never knew) is not let in any more.
  auto old_credential = c.job_secret_hex(ended);
  REQUIRE(old_credential.has_value());
  v = a.check("Bearer " + *old_credential, "");
  CHECK(v.status == 403);
  CHECK_FALSE(v.who.has_value());

  // Another cluster's token, garbage, and a token one character off: 403, saying nothing more.
  for (const std::string& wrong : {std::string(64, 'b'), std::string("hunter2"), token.substr(0, 63) + "b"}) {
    v = a.check("Bearer " + wrong, "");
    CHECK(v.status == 403);
    CHECK(v.message.find(wrong) == std::string::npos);
  }
}

TEST_CASE("no credential is 401; a header that is not Bearer is 401; a session cookie counts while it lives", "[http][auth]") {
  const auto job = job_id::random();
  std::vector<job_id> running{job};
  auto sessions = std::make_shared<http::session_store>(std::chrono::seconds(3600));
  http::authenticator a(cluster(), [&] { return running; }, sessions);
  CHECK(a.check("", "").status == 401);
  CHECK(a.check("   ", "other=1").status == 401);
  CHECK(a.check("Basic dXNlcjpwYXNz", "").status == 401);
  CHECK(a.check("Bearer ", "").status == 401);
  // The cookie holds a session id, never the token: the token there is no session.
  CHECK(a.check("", "celer_session=" + token).status == 401);
  const auto id = sessions->open({.admin = true, .job = {}});
  CHECK(id.size() == 64);
  CHECK(id != token);
  auto v = a.check("", "theme=dark; celer_session=" + id + "; x=y");
  REQUIRE(v.status == 200);
  CHECK(v.who->admin);
  // A Bearer credential wins over the cookie.
  CHECK(a.check("Bearer nope", "celer_session=" + id).status == 403);
  sessions->close(id);
  CHECK(a.check("", "celer_session=" + id).status == 401);
  // A job's session lasts while the job runs.
  const auto job_session = sessions->open({.admin = false, .job = job});
  CHECK(a.check("", "celer_session=" + job_session).status == 200);
  running.clear();
  CHECK(a.check("", "celer_session=" + job_session).status == 403);
  // Sessions expire.
  auto brief = std::make_shared<http::session_store>(std::chrono::seconds(0));
  http::authenticator b(cluster(), {}, brief);
  CHECK(b.check("", "celer_session=" + brief->open({.admin = true, .job = {}})).status == 401);
  CHECK(http::cookie_value("a=1; celer_session=abc ;b=2", "celer_session") == "abc");
  CHECK(http::cookie_value("a=1", "celer_session").empty());
}

TEST_CASE("dashboard sessions outlive a head restarted on the same tables, which hold no usable session id",
          "[http][auth]") {
  auto rows = std::make_shared<fakes::memory_table_db::rows>();
  const auto job = job_id::random();
  std::string admin_id, job_id_text;
  {
    http::session_store first(std::chrono::seconds(3600), std::make_shared<fakes::memory_table_db>(rows));
    admin_id = first.open({.admin = true, .job = {}});
    job_id_text = first.open({.admin = false, .job = job});
  }
  // On disk: two rows, keyed by a hash; neither the ids nor anything from them in the clear.
  REQUIRE(rows->tables["http_sessions"].size() == 2);
  for (const auto& [key, value] : rows->tables["http_sessions"]) {
    CHECK(key != admin_id);
    CHECK(key != job_id_text);
    CHECK(value.find(admin_id) == std::string::npos);
    CHECK(value.find(job_id_text) == std::string::npos);
  }
  http::session_store second(std::chrono::seconds(3600), std::make_shared<fakes::memory_table_db>(rows));
  auto admin = second.find(admin_id);
  REQUIRE(admin);
  CHECK(admin->admin);
  auto as_job = second.find(job_id_text);
  REQUIRE(as_job);
  CHECK_FALSE(as_job->admin);
  CHECK(as_job->job == job);
  CHECK_FALSE(second.find(std::string(64, 'a')));
  // Logging out reaches the tables: a third head does not know the session.
  second.close(admin_id);
  CHECK(rows->tables["http_sessions"].size() == 1);
  http::session_store third(std::chrono::seconds(3600), std::make_shared<fakes::memory_table_db>(rows));
  CHECK_FALSE(third.find(admin_id));
  CHECK(third.find(job_id_text));
  // Expired sessions are dropped when a head loads them, and garbage rows with them.
  rows->tables["http_sessions"]["junk"] = "admin not-a-number";
  {
    http::session_store brief(std::chrono::seconds(0), std::make_shared<fakes::memory_table_db>(rows));
    (void)brief.open({.admin = true, .job = {}});
  }
  http::session_store fourth(std::chrono::seconds(3600), std::make_shared<fakes::memory_table_db>(rows));
  CHECK(rows->tables["http_sessions"].size() == 1);  // the job's session, still live
  CHECK(fourth.find(job_id_text));
}
