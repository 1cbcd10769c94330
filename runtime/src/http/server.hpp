#pragma once
// The head's HTTP server (docs/dashboard.md): cpp-httplib on threads of its own, every
// request authenticated from its headers before its body is read or any route runs
// (auth.hpp), cross-origin and non-JSON state changes refused, slow senders cut off
// (connections.hpp), bound to loopback unless told otherwise, HTTPS with a certificate and
// key. The routes are injected: the server knows nothing of the cluster (api.hpp has
// celer's).
//
//   std::vector<http::route> routes{{"GET", "/api/version", [](const http::request&) {
//     return http::response{.body = R"({"version":"1"})"};
//   }}};
//   auto s = http::server::start({.host = "127.0.0.1", .port = 0}, std::move(auth), routes);
//   if (!s) ...;                       // address in use, a bad certificate: the reason
//   (*s)->port();                      // the port it got
//   (*s)->stop();

#include "http/auth.hpp"

#include <celer/error.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace celer::http {

/// A request as a route sees it: authenticated already.
struct request {
  std::string method;
  std::string path;
  /// The pattern's capture groups (for "/api/jobs/([^/]+)": the id).
  std::vector<std::string> captures;
  /// Query parameters (the first value of each).
  std::map<std::string, std::string> query;
  std::string body;
  principal who;
  /// The dashboard's CSRF token when the request came with the session cookie (the page
  /// embeds it); empty for a Bearer credential.
  std::string csrf;
};

struct response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  /// A streamed body (chunked) instead of `body`: called again and again, it appends what
  /// is new to `chunk` (waiting a little when nothing is) and returns false once the stream
  /// ends. The client going away ends it too.
  std::function<bool(std::string& chunk)> stream;
};

using handler = std::function<response(const request&)>;

struct route {
  /// "GET", "POST", "DELETE", ...
  std::string method;
  /// A regular expression matched against the whole path.
  std::string pattern;
  handler run;
};

struct server_options {
  /// Loopback by default; anything else serves the network (and the server says so).
  std::string host = "127.0.0.1";
  /// 0: any free port.
  int port = 0;
  /// Both or neither: PEM files for HTTPS.
  std::string tls_cert;
  std::string tls_key;
  /// Server threads: connections served at once (a followed log holds one for as long as
  /// it runs). When all are taken, a new connection closes the oldest one that has not
  /// yet been authenticated (connections.hpp).
  int threads = 32;
  /// From a request's first byte to the end of its headers (request line and headers
  /// together at most 64 KiB).
  std::chrono::milliseconds header_deadline{10'000};
  /// The largest body before the credential is known, or for POST /api/login.
  std::uint64_t unauthenticated_body_bytes = 64u << 10;
  /// The largest body with a credential, but for the admin's package upload.
  std::uint64_t body_bytes = 1u << 20;
  /// The admin's PUT /api/packages/<digest> (jobs::pack_options::limit_bytes and more).
  std::uint64_t package_bytes = 160u << 20;
  /// A body has 30 s plus a second for every MiB to arrive.
  std::chrono::milliseconds body_deadline_base{30'000};
};

class server {
public:
  /// Binds and starts serving on threads of its own. invalid_argument for one of
  /// tls_cert/tls_key without the other or a certificate that does not load; unavailable
  /// when the address cannot be bound.
  [[nodiscard]] static expected<std::unique_ptr<server>> start(const server_options& options, authenticator auth,
                                                               std::vector<route> routes);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  [[nodiscard]] int port() const noexcept;
  [[nodiscard]] bool tls() const noexcept;
  /// "http://127.0.0.1:8266" (https with TLS).
  [[nodiscard]] std::string url() const;
  /// Responses sent so far, by status code (what /metrics reports); requests cpp-httplib
  /// refuses itself as malformed (400) before celer sees them are not counted.
  [[nodiscard]] std::map<int, std::uint64_t> responses_by_code() const;
  /// Connections closed to make room for others, or cut short by a deadline or a byte
  /// budget (connections.hpp).
  [[nodiscard]] std::uint64_t connections_evicted() const;
  [[nodiscard]] std::uint64_t connections_cut_short() const;
  /// The session cookie's name: "celer_session_<port>" ("__Host-..." under TLS).
  [[nodiscard]] std::string cookie_name() const;
  /// Stops serving and joins the threads; idempotent.
  void stop();

  struct impl;

private:
  explicit server(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

/// Whether binding `host` serves beyond this machine (anything but 127.0.0.0/8, ::1 and
/// localhost).
[[nodiscard]] bool exposed(const std::string& host);

} // namespace celer::http
