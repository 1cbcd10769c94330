// The head's HTTP server (runtime/src/http/server.hpp) over real loopback sockets: every
// method and path needs a credential before any route runs; routes, 404 and 405; the
// response counters; HTTPS with a certificate made by openssl; what refuses to start.
#include "http/server.hpp"

#include <catch2/catch.hpp>

#include <httplib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

using namespace celer;

namespace {

const std::string token(64, 'c');

http::authenticator make_auth() {
  auto c = credentials::for_cluster(token);
  REQUIRE(c.has_value());
  return http::authenticator(*c, {});
}

std::vector<http::route> routes() {
  return {{"GET", "/api/hello/([a-z]+)", [](const http::request& r) {
             return http::response{.body = "{\"hello\":\"" + r.captures.at(0) + "\",\"as\":\"" + r.who.describe() + "\"}"};
           }},
          {"POST", "/api/echo", [](const http::request& r) { return http::response{.status = 201, .body = r.body}; }},
          {"GET", "/api/throws", [](const http::request&) -> http::response { throw std::runtime_error("it broke"); }}};
}

httplib::Headers bearer(const std::string& credential) { return {{"Authorization", "Bearer " + credential}}; }

} // namespace

TEST_CASE("every method on every path needs a credential; then routes answer, 404 and 405 otherwise", "[http][server]") {
  auto s = http::server::start({.host = "127.0.0.1", .port = 0}, make_auth(), routes());
  REQUIRE(s.has_value());
  httplib::Client c("127.0.0.1", (*s)->port());
  CHECK((*s)->url() == "http://127.0.0.1:" + std::to_string((*s)->port()));

  // Without a credential: 401 everywhere, known path or not, whatever the method (the
  // shapes of Ray's CVE-2023-48022 and CVE-2026-27482: POST and DELETE as a stranger).
  for (const auto* path : {"/api/hello/x", "/api/echo", "/api/jobs/", "/nowhere", "/"}) {
    INFO(path);
    CHECK(c.Get(path)->status == 401);
    CHECK(c.Post(path, "{}", "application/json")->status == 401);
    CHECK(c.Delete(path)->status == 401);
    CHECK(c.Put(path, "x", "text/plain")->status == 401);
  }
  auto r = c.Get("/api/hello/x");
  CHECK(r->get_header_value("WWW-Authenticate") == "Bearer realm=\"celer\"");
  // A browser's Origin or a curl User-Agent changes nothing (CVE-2025-62593's shape).
  CHECK(c.Get("/api/hello/x", {{"Origin", "http://127.0.0.1"}, {"User-Agent", "curl/7.88"}})->status == 401);
  CHECK(c.Get("/api/hello/x", bearer(std::string(64, 'd')))->status == 403);

  r = c.Get("/api/hello/world", bearer(token));
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body == R"({"hello":"world","as":"the admin"})");
  CHECK(r->get_header_value("Content-Type") == "application/json");
  r = c.Post("/api/echo", bearer(token), "{\"a\":1}", "application/json");
  CHECK(r->status == 201);
  CHECK(r->body == "{\"a\":1}");
  CHECK(c.Get("/api/nowhere", bearer(token))->status == 404);
  CHECK(c.Delete("/api/echo", bearer(token))->status == 405);
  r = c.Get("/api/throws", bearer(token));
  CHECK(r->status == 500);
  CHECK(r->body.find("it broke") != std::string::npos);

  const auto codes = (*s)->responses_by_code();
  CHECK(codes.at(401) == 22);
  CHECK(codes.at(403) == 1);
  CHECK(codes.at(200) == 1);
  CHECK(codes.at(201) == 1);
  CHECK(codes.at(404) == 1);
  CHECK(codes.at(405) == 1);
  CHECK(codes.at(500) == 1);
  (*s)->stop();
  (*s)->stop();  // idempotent
}

TEST_CASE("the dashboard logs in once: a session cookie, HttpOnly and SameSite=Strict, that logout ends", "[http][server]") {
  auto s = http::server::start({.host = "127.0.0.1", .port = 0}, make_auth(), routes());
  REQUIRE(s.has_value());
  httplib::Client c("127.0.0.1", (*s)->port());
  // A browser without a session gets the login form, with the 401.
  auto r = c.Get("/api/hello/x", {{"Accept", "text/html,application/xhtml+xml"}});
  REQUIRE(r);
  CHECK(r->status == 401);
  CHECK(r->get_header_value("Content-Type").starts_with("text/html"));
  CHECK_THAT(r->body, Catch::Contains("<form method=\"post\" action=\"/api/login\">"));
  CHECK_THAT(r->get_header_value("Content-Security-Policy"), Catch::Contains("default-src 'none'"));

  // A wrong token: 403, and no cookie.
  r = c.Post("/api/login", "token=" + std::string(64, 'e'), "application/x-www-form-urlencoded");
  CHECK(r->status == 403);
  CHECK_FALSE(r->has_header("Set-Cookie"));
  CHECK(c.Post("/api/login", "", "application/x-www-form-urlencoded")->status == 401);

  // The form's post: a session id in the cookie (never the token), then back to /.
  r = c.Post("/api/login", "token=" + token, "application/x-www-form-urlencoded");
  REQUIRE(r);
  CHECK(r->status == 303);
  CHECK(r->get_header_value("Location") == "/");
  const auto set_cookie = r->get_header_value("Set-Cookie");
  CHECK_THAT(set_cookie, Catch::StartsWith("celer_session=") && Catch::Contains("; HttpOnly") &&
                           Catch::Contains("; SameSite=Strict") && Catch::Contains("; Path=/") && Catch::Contains("Max-Age="));
  CHECK(set_cookie.find(token) == std::string::npos);
  const auto cookie = set_cookie.substr(0, set_cookie.find(';'));
  r = c.Get("/api/hello/cookie", {{"Cookie", cookie}});
  CHECK(r->status == 200);
  CHECK(r->body == R"({"hello":"cookie","as":"the admin"})");

  // A program's JSON login: 204 and the cookie.
  r = c.Post("/api/login", "{\"token\": \"" + token + "\"}", "application/json");
  CHECK(r->status == 204);
  CHECK(r->has_header("Set-Cookie"));

  // Logout ends the session: the cookie is cleared, and the old one no longer works.
  r = c.Post("/api/logout", {{"Cookie", cookie}}, "", "application/x-www-form-urlencoded");
  CHECK(r->status == 204);
  CHECK_THAT(r->get_header_value("Set-Cookie"), Catch::Contains("Max-Age=0"));
  CHECK(c.Get("/api/hello/cookie", {{"Cookie", cookie}})->status == 401);
  CHECK(c.Post("/api/logout", "", "text/plain")->status == 401);  // logout too needs a credential
}

TEST_CASE("HTTPS with a certificate and key; one without the other, or a bad file, is refused by name", "[http][server]") {
  if (std::system("command -v openssl > /dev/null 2>&1") != 0) {
    WARN("openssl is not installed: skipped");
    return;
  }
  char dir_template[] = "/tmp/celer-tls.XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(dir_template);
  const auto cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string make = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout " + key +
                           " -out " + cert + " > /dev/null 2>&1";
  REQUIRE(std::system(make.c_str()) == 0);

  auto s = http::server::start({.host = "127.0.0.1", .port = 0, .tls_cert = cert, .tls_key = key}, make_auth(), routes());
  REQUIRE(s.has_value());
  CHECK((*s)->tls());
  CHECK((*s)->url().starts_with("https://127.0.0.1:"));
  httplib::SSLClient c("127.0.0.1", (*s)->port());
  c.set_ca_cert_path(cert.c_str());
  c.enable_server_certificate_verification(true);
  auto r = c.Get("/api/hello/tls", bearer(token));
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(c.Get("/api/hello/tls")->status == 401);
  // Plain HTTP to the HTTPS port gets nowhere.
  httplib::Client plain("127.0.0.1", (*s)->port());
  plain.set_connection_timeout(2);
  plain.set_read_timeout(2);
  auto p = plain.Get("/api/hello/tls", bearer(token));
  CHECK((!p || p->status != 200));
  (*s)->stop();

  auto half = http::server::start({.host = "127.0.0.1", .port = 0, .tls_cert = cert}, make_auth(), routes());
  REQUIRE_FALSE(half.has_value());
  CHECK(half.error().code() == error_code::invalid_argument);
  CHECK_THAT(half.error().message(), Catch::Contains("--tls-key"));
  auto bad = http::server::start({.host = "127.0.0.1", .port = 0, .tls_cert = key, .tls_key = cert}, make_auth(), routes());
  REQUIRE_FALSE(bad.has_value());
  CHECK_THAT(bad.error().message(), Catch::Contains("does not load"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a port in use is refused as unavailable; only loopback counts as not exposed", "[http][server]") {
  auto first = http::server::start({.host = "127.0.0.1", .port = 0}, make_auth(), routes());
  REQUIRE(first.has_value());
  auto second = http::server::start({.host = "127.0.0.1", .port = (*first)->port()}, make_auth(), routes());
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().code() == error_code::unavailable);
  CHECK_FALSE(http::exposed("127.0.0.1"));
  CHECK_FALSE(http::exposed("127.0.0.2"));
  CHECK_FALSE(http::exposed("localhost"));
  CHECK_FALSE(http::exposed("::1"));
  CHECK(http::exposed("0.0.0.0"));
  CHECK(http::exposed("10.1.2.3"));
}
