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

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
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

/// A raw TCP connection to the server, for what no client library sends.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

/// What the server sends until it closes or `ms` pass; "" when it closed without a word.
std::string read_until_closed(int fd, int ms) {
  std::string got;
  char buf[4096];
  for (;;) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, ms) <= 0) return got + "<still open>";
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return got;
    got.append(buf, static_cast<std::size_t>(n));
  }
}

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
  CHECK((*s)->cookie_name() == "celer_session_" + std::to_string((*s)->port()));
  CHECK_THAT(set_cookie, Catch::StartsWith((*s)->cookie_name() + "=") && Catch::Contains("; HttpOnly") &&
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

  // Logout ends the session (with the page's CSRF token): the cookie is cleared, and the
  // old one no longer works.
  const auto session = cookie.substr(cookie.find('=') + 1);
  CHECK(c.Post("/api/logout", {{"Cookie", cookie}}, "", "application/x-www-form-urlencoded")->status == 403);
  r = c.Post("/api/logout", {{"Cookie", cookie}}, "csrf=" + http::csrf_token(session), "application/x-www-form-urlencoded");
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

TEST_CASE("a state change from another origin, as a form, or with the cookie but not its CSRF token is refused", "[http][server]") {
  auto s = http::server::start({.host = "127.0.0.1", .port = 0}, make_auth(), routes());
  REQUIRE(s.has_value());
  httplib::Client c("127.0.0.1", (*s)->port());
  const std::string own = "http://127.0.0.1:" + std::to_string((*s)->port());
  auto with = [&](httplib::Headers h) {
    h.emplace("Authorization", "Bearer " + token);
    return h;
  };
  // Another port of this host is another origin; so is a page's Referer from there.
  auto r = c.Post("/api/echo", with({{"Origin", "http://127.0.0.1:1"}}), "{}", "application/json");
  CHECK(r->status == 403);
  CHECK_THAT(r->body, Catch::Contains("cross-origin request refused"));
  CHECK(c.Post("/api/echo", with({{"Origin", "null"}}), "{}", "application/json")->status == 403);
  CHECK(c.Post("/api/echo", with({{"Referer", "http://localhost:9/page"}}), "{}", "application/json")->status == 403);
  CHECK(c.Post("/api/echo", with({{"Origin", own}}), "{}", "application/json")->status == 201);
  CHECK(c.Post("/api/echo", with({{"Referer", own + "/"}}), "{}", "application/json")->status == 201);
  // The login form too, from elsewhere.
  CHECK(c.Post("/api/login", {{"Origin", "http://127.0.0.1:1"}}, "token=" + token, "application/x-www-form-urlencoded")->status ==
        403);
  // What a form can send is not JSON here, whatever it holds.
  for (const auto* type : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"}) {
    INFO(type);
    r = c.Post("/api/echo", with({}), "{\"a\":1}", type);
    CHECK(r->status == 415);
    CHECK_THAT(r->body, Catch::Contains("must be application/json"));
  }
  CHECK(c.Post("/api/echo", with({}), "{}", "application/json; charset=utf-8")->status == 201);
  // The cookie alone does not change anything: the page's token goes with it.
  r = c.Post("/api/login", "{\"token\": \"" + token + "\"}", "application/json");
  const auto set_cookie = r->get_header_value("Set-Cookie");
  const auto cookie = set_cookie.substr(0, set_cookie.find(';'));
  const auto session = cookie.substr(cookie.find('=') + 1);
  r = c.Post("/api/echo", {{"Cookie", cookie}}, "{}", "application/json");
  CHECK(r->status == 403);
  CHECK_THAT(r->body, Catch::Contains("CSRF"));
  CHECK(c.Post("/api/echo", {{"Cookie", cookie}, {"X-CSRF-Token", std::string(64, '0')}}, "{}", "application/json")->status == 403);
  CHECK(c.Post("/api/echo", {{"Cookie", cookie}, {"X-CSRF-Token", http::csrf_token(session)}}, "{}", "application/json")->status ==
        201);
  CHECK(c.Get("/api/hello/x", {{"Cookie", cookie}})->status == 200);  // reading needs none
  // Another head's cookie (another port) is not this one's.
  CHECK(c.Get("/api/hello/x", {{"Cookie", "celer_session_1=" + session}})->status == 401);
  const auto codes = (*s)->responses_by_code();
  CHECK(codes.at(403) == 6);
  CHECK(codes.at(415) == 3);
}

TEST_CASE("a body is refused from its headers, before it is read, beyond what the caller may send", "[http][server]") {
  auto s = http::server::start({.host = "127.0.0.1", .port = 0}, make_auth(), routes());
  REQUIRE(s.has_value());
  const int port = (*s)->port();
  // Headers only, announcing 150 MiB: the answer comes without a byte of the body.
  auto ask = [&](const std::string& headers) {
    const int fd = connect_to(port);
    const std::string head = "POST /api/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + headers +
                             "Content-Length: 157286400\r\n\r\n";
    REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
    const auto got = read_until_closed(fd, 5000);
    ::close(fd);
    return got;
  };
  CHECK_THAT(ask(""), Catch::StartsWith("HTTP/1.1 401"));
  CHECK_THAT(ask("Authorization: Bearer " + std::string(64, 'd') + "\r\n"), Catch::StartsWith("HTTP/1.1 403"));
  const auto big = ask("Authorization: Bearer " + token + "\r\n");
  CHECK_THAT(big, Catch::StartsWith("HTTP/1.1 413") && Catch::Contains("over this request's limit of 1048576 bytes"));
  // Chunked bodies have no size to check first.
  const int fd = connect_to(port);
  const std::string chunked = "POST /api/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
                              "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  REQUIRE(::send(fd, chunked.data(), chunked.size(), MSG_NOSIGNAL) > 0);
  CHECK_THAT(read_until_closed(fd, 5000), Catch::StartsWith("HTTP/1.1 411"));
  ::close(fd);
  // Within the limit, the body is read and routed.
  httplib::Client c("127.0.0.1", port);
  CHECK(c.Post("/api/echo", bearer(token), std::string(1u << 20, ' '), "application/json")->status == 201);
}

TEST_CASE("slow senders lose their connection at the header deadline, and never hold every thread", "[http][server]") {
  http::server_options o{.host = "127.0.0.1", .port = 0};
  o.threads = 2;
  o.header_deadline = std::chrono::milliseconds(500);
  auto s = http::server::start(o, make_auth(), routes());
  REQUIRE(s.has_value());
  const int port = (*s)->port();
  // Four senders of a request that never ends: more than the server has threads.
  std::vector<int> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(connect_to(port));
    const std::string part = "GET /api/hello/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    REQUIRE(::send(slow.back(), part.data(), part.size(), MSG_NOSIGNAL) > 0);
  }
  // The admin still gets answers: a new connection makes room by closing the oldest one
  // that has not yet been authenticated.
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(5);
  for (int i = 0; i < 3; ++i) {
    auto r = c.Get("/api/hello/admin", bearer(token));
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  // Every slow sender is closed: evicted without a word, or cut at its deadline (httplib
  // answers what it could not read with a 400).
  for (int fd : slow) {
    const auto got = read_until_closed(fd, 5000);
    INFO(got);
    CHECK((got.empty() || got.starts_with("HTTP/1.1 400")));
    ::close(fd);
  }
  INFO("evicted " << (*s)->connections_evicted() << ", cut short " << (*s)->connections_cut_short());
  CHECK((*s)->connections_evicted() + (*s)->connections_cut_short() >= 4);
  // Headers that never end are cut at their budget too (64 KiB), not read for ever.
  const int fd = connect_to(port);
  std::string flood = "GET /api/hello/x HTTP/1.1\r\n";
  for (int i = 0; i < 2000; ++i) flood += "X-Junk-" + std::to_string(i) + ": " + std::string(40, 'j') + "\r\n";
  (void)::send(fd, flood.data(), flood.size(), MSG_NOSIGNAL);
  CHECK(read_until_closed(fd, 5000).find("200 OK") == std::string::npos);
  ::close(fd);
}
