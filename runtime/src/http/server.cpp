// The head's HTTP server (server.hpp), on cpp-httplib (Debian's libcpp-httplib, built with
// OpenSSL).
#include "http/server.hpp"

#include "http/connections.hpp"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>

#include <sys/socket.h>

namespace celer::http {

namespace {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

/// What a browser without a session gets (with the 401 or 403): a form that posts the
/// token to /api/login. Nothing fetched from elsewhere, no script.
std::string login_page(const std::string& problem) {
  return R"(<!doctype html><html lang="en"><head><meta charset="utf-8"><title>celer: log in</title>
<style>body{font:15px system-ui,sans-serif;margin:4em auto;max-width:34em;color:#222}
input{font:inherit;width:100%;padding:.4em;margin:.5em 0;box-sizing:border-box}
button{font:inherit;padding:.4em 1.2em}.problem{color:#a00}code{background:#eee;padding:0 .2em}</style></head>
<body><h1>celer</h1><p>Log in with the cluster's token (the file <code>token</code> in the head's session
directory) or a job's credential.</p>)" +
         (problem.empty() ? std::string() : "<p class=\"problem\">" + html_escape(problem) + "</p>") +
         R"(<form method="post" action="/api/login"><input type="password" name="token" autocomplete="current-password"
placeholder="token" autofocus required><button type="submit">Log in</button></form></body></html>
)";
}


/// What the pre-routing check learnt of the request this thread serves, for dispatch.
struct checked_request {
  std::optional<principal> who;
  /// The session id when the cookie authenticated the request.
  std::string session;
};
thread_local checked_request this_request;

bool changes_state(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// "scheme://host[:port]" of a URL (a Referer), lowercased; empty if it has none.
std::string origin_of(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) return {};
  const auto end = url.find_first_of("/?#", scheme + 3);
  return lower(url.substr(0, end));
}

/// The media type of a Content-Type header, lowercased, without its parameters.
std::string media_type(const std::string& content_type) {
  auto t = lower(content_type.substr(0, content_type.find(';')));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.erase(0, 1);
  return t;
}

} // namespace

struct server::impl {
  // Declared before srv: the server's threads use it until srv is gone.
  connection_gate gate;
  std::unique_ptr<httplib::Server> srv;
  bool tls = false;
  std::string host;
  int port = 0;
  std::string cookie;
  server_options options;
  authenticator auth;
  std::vector<std::pair<route, std::regex>> routes;
  std::thread thread;
  mutable std::mutex m;
  std::map<int, std::uint64_t> by_code;
  std::atomic<bool> stopped{false};

  impl(const server_options& o, authenticator a)
    : gate(connection_limits{.threads = std::max(1, o.threads), .header_deadline = o.header_deadline}),
      options(o), auth(std::move(a)) {}

  /// Every answer celer gives goes through here, counted before it is sent (so a client
  /// that has its answer sees it counted).
  void reply(httplib::Response& res, response r) {
    {
      std::lock_guard lock(m);
      ++by_code[r.status];
    }
    res.status = r.status;
    for (const auto& [k, v] : r.headers) res.set_header(k, v);
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    if (!r.stream) {
      // Moved, not copied (set_content copies): a log page is a MiB.
      res.body = std::move(r.body);
      res.set_header("Content-Type", r.content_type);
      return;
    }
    res.set_chunked_content_provider(r.content_type, [next = r.stream](std::size_t, httplib::DataSink& sink) {
      std::string chunk;
      const bool more = next(chunk);
      if (!chunk.empty() && !sink.write(chunk.data(), chunk.size())) return false;  // the client left
      if (!more) sink.done();
      return true;
    });
  }

  static std::string error_body(const std::string& message) {
    // A reason may quote what the client sent (an Origin): any bytes, made valid UTF-8.
    return nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  static bool wants_html(const httplib::Request& req) {
    return req.get_header_value("Accept").find("text/html") != std::string::npos;
  }

  /// A refusal: JSON for programs; for a browser (Accept: text/html) the login page, with
  /// the same status.
  void refuse(const httplib::Request& req, httplib::Response& res, int status, const std::string& message) {
    http_warning("HTTP: refused " + req.method + " " + req.path + " from " + req.remote_addr + " (" + std::to_string(status) +
                 "): " + message);
    response r{.status = status, .body = error_body(message)};
    if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"celer\"");
    if (wants_html(req)) {
      r.content_type = "text/html; charset=utf-8";
      r.body = login_page(status == 401 ? "" : message);
      r.headers.emplace_back(
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'");
    }
    reply(res, r);
  }

  std::string session_cookie_header(const std::string& value, std::chrono::seconds max_age) const {
    return cookie + "=" + value + "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" +
           std::to_string(max_age.count()) + (tls ? "; Secure" : "");
  }

  /// POST /api/login: the credential in the body (a form's `token` field, or JSON
  /// {"token": ...}) is checked as a Bearer one; a good one opens a session whose id the
  /// browser keeps in an HttpOnly, SameSite=Strict cookie.
  void login(const httplib::Request& req, httplib::Response& res) {
    std::string presented = req.has_param("token") ? req.get_param_value("token") : std::string();
    if (presented.empty() && req.get_header_value("Content-Type").find("json") != std::string::npos) {
      const auto j = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("token") && j["token"].is_string()) presented = j["token"].get<std::string>();
    }
    if (presented.empty()) return refuse(req, res, 401, "log in with the cluster's token or a job's credential");
    const auto verdict = auth.check_credential(presented);
    if (verdict.status != 200) return refuse(req, res, verdict.status, verdict.message);
    const auto id = auth.sessions().open(*verdict.who);
    response r{.status = 204, .body = {}};
    r.headers.emplace_back("Set-Cookie", session_cookie_header(id, auth.sessions().ttl()));
    if (wants_html(req) || req.has_param("token")) {
      r.status = 303;
      r.headers.emplace_back("Location", "/");
    }
    reply(res, r);
  }

  /// POST /api/logout: ends the cookie's session.
  void logout(const httplib::Request& req, httplib::Response& res) {
    const auto& id = this_request.session;
    if (!id.empty()) {
      // The form's field or the header: the page's token, so no other page logs one out.
      const auto presented = req.has_header("X-CSRF-Token") ? req.get_header_value("X-CSRF-Token") : req.get_param_value("csrf");
      if (presented != csrf_token(id)) return refuse(req, res, 403, "logging out needs the dashboard's CSRF token");
      auth.sessions().close(id);
    }
    response r{.status = wants_html(req) ? 303 : 204, .body = {}};
    r.headers.emplace_back("Set-Cookie", session_cookie_header("", std::chrono::seconds(0)));
    if (r.status == 303) r.headers.emplace_back("Location", "/");
    reply(res, r);
  }

  /// A refusal before the body is read: the connection closes after it (what is left of
  /// the body is never parsed as a request).
  httplib::Server::HandlerResponse early(const httplib::Request& req, httplib::Response& res, int status,
                                         const std::string& message) {
    refuse(req, res, status, message);
    res.set_header("Connection", "close");
    if (auto* c = connection_gate::current(); c != nullptr) c->close_after_reply();
    return httplib::Server::HandlerResponse::Handled;
  }

  /// Runs after the headers and before any byte of the body is read (cpp-httplib's
  /// pre-routing handler, Server::routing; and for "Expect: 100-continue" before the
  /// go-ahead): the Origin of a state change, the credential, the CSRF token that goes with
  /// a cookie, the body's Content-Type, and its size against what this caller may send. Only
  /// then may the body be read, within its budget and deadline.
  httplib::Server::HandlerResponse before_body(const httplib::Request& req, httplib::Response& res) {
    this_request = {};
    const bool changes = changes_state(req.method);
    if (req.has_header("Transfer-Encoding"))
      return early(req, res, 411, "a request body needs a Content-Length (chunked bodies are not accepted)");
    std::uint64_t length = 0;
    if (req.has_header("Content-Length")) {
      const auto v = req.get_header_value("Content-Length");
      if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); }))
        return early(req, res, 400, "Content-Length is not a number");
      length = std::stoull(v);
    }
    const bool login_request = req.path == "/api/login" && req.method == "POST";
    const bool logout_request = req.path == "/api/logout" && req.method == "POST";
    if (changes) {
      // A browser says where a request comes from; a page on another origin (another
      // port of this host included) may not change anything here.
      const std::string own = std::string(tls ? "https://" : "http://") + lower(req.get_header_value("Host"));
      if (req.has_header("Origin")) {
        const auto origin = req.get_header_value("Origin");
        if (lower(origin) != own)
          return early(req, res, 403,
                       "cross-origin request refused: Origin " + origin + " is not this server's (" + own + ")");
      } else if (req.has_header("Referer")) {
        const auto from = origin_of(req.get_header_value("Referer"));
        if (from != own)
          return early(
            req, res, 403,
            "cross-origin request refused: the Referer's origin " + from + " is not this server's (" + own + ")");
      }
    }
    std::uint64_t allowed = options.unauthenticated_body_bytes;
    if (!login_request) {
      const auto authorization = req.get_header_value("Authorization");
      const auto verdict = auth.check(authorization, req.get_header_value("Cookie"), cookie);
      if (verdict.status != 200) return early(req, res, verdict.status, verdict.message);
      this_request.who = verdict.who;
      if (authorization.empty()) this_request.session = cookie_value(req.get_header_value("Cookie"), cookie);
      // A cookie rides along whatever page sent the request: a state change with it must
      // also prove it comes from the dashboard's own page.
      if (changes && !this_request.session.empty() && !logout_request &&
          req.get_header_value("X-CSRF-Token") != csrf_token(this_request.session))
        return early(req, res, 403, "a request with the dashboard's session cookie needs its CSRF token in X-CSRF-Token");
      const bool package = verdict.who->admin && req.method == "PUT" && req.path.starts_with("/api/packages/");
      allowed = package ? options.package_bytes : options.body_bytes;
    }
    if (changes && length > 0) {
      const auto type = media_type(req.get_header_value("Content-Type"));
      const bool package = req.method == "PUT" && req.path.starts_with("/api/packages/");
      const bool form = (login_request || logout_request) && type == "application/x-www-form-urlencoded";
      const char* wanted = package ? "application/octet-stream" : "application/json";
      if (type != wanted && !form)
        return early(req, res, 415, "a " + req.method + " body here must be " + wanted + ", not '" +
                                      (type.empty() ? std::string("none") : type) + "'");
    }
    if (length > allowed)
      return early(req, res, 413, "a body of " + std::to_string(length) + " bytes is over this request's limit of " +
                                    std::to_string(allowed) + " bytes");
    if (auto* c = connection_gate::current(); c != nullptr)
      c->allow_body(length, std::chrono::steady_clock::now() + options.body_deadline_base +
                              std::chrono::seconds(length >> 20));
    return httplib::Server::HandlerResponse::Unhandled;
  }

  /// Every request, whatever its method and path, once before_body let it through: find
  /// the route. Only POST /api/login comes unauthenticated: it carries its credential in its
  /// body.
  void dispatch(const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/api/login" && req.method == "POST") return login(req, res);
    if (!this_request.who) return refuse(req, res, 401, "a credential is needed");  // before_body did not run
    const principal who = *this_request.who;
    if (req.path == "/api/logout" && req.method == "POST") return logout(req, res);
    bool path_known = false;
    for (const auto& [rt, re] : routes) {
      std::smatch match;
      if (!std::regex_match(req.path, match, re)) continue;
      path_known = true;
      if (rt.method != req.method) continue;
      request r{.method = req.method, .path = req.path, .captures = {}, .query = {}, .body = req.body, .who = who,
                .csrf = this_request.session.empty() ? std::string() : csrf_token(this_request.session)};
      for (std::size_t i = 1; i < match.size(); ++i) r.captures.push_back(match[i].str());
      for (const auto& [k, v] : req.params) r.query.emplace(k, v);
      try {
        reply(res, rt.run(r));
      } catch (const std::exception& e) {
        reply(res, {.status = 500, .body = error_body(e.what())});
      }
      return;
    }
    if (path_known) reply(res, {.status = 405, .body = error_body(req.method + " is not allowed on " + req.path)});
    else reply(res, {.status = 404, .body = error_body("no such endpoint: " + req.path)});
  }
};

server::server(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

server::~server() { stop(); }

expected<std::unique_ptr<server>> server::start(const server_options& options, authenticator auth, std::vector<route> routes) {
  if (options.tls_cert.empty() != options.tls_key.empty())
    return error(error_code::invalid_argument, "HTTPS needs both --tls-cert and --tls-key");
  auto i = std::make_unique<impl>(options, std::move(auth));
  for (auto& r : routes) {
    try {
      std::regex re(r.pattern);
      i->routes.emplace_back(std::move(r), std::move(re));
    } catch (const std::regex_error& e) {
      return error(error_code::invalid_argument, "route pattern '" + r.pattern + "': " + e.what());
    }
  }
  if (!options.tls_cert.empty()) {
    auto ssl = std::make_unique<guarded_server<httplib::SSLServer>>(i->gate, options.tls_cert.c_str(), options.tls_key.c_str());
    if (!ssl->is_valid())
      return error(error_code::invalid_argument, "the TLS certificate " + options.tls_cert + " or key " + options.tls_key +
                                                   " does not load (PEM files, the key matching the certificate)");
    i->srv = std::move(ssl);
    i->tls = true;
  } else {
    i->srv = std::make_unique<guarded_server<httplib::Server>>(i->gate);
  }
  auto* p = i.get();
  i->srv->new_task_queue = [p] { return p->gate.make_queue(); };
  // What httplib announces (Keep-Alive: timeout=5, max=100); connections.hpp enforces it.
  i->srv->set_keep_alive_timeout(5);
  i->srv->set_keep_alive_max_count(static_cast<std::size_t>(i->gate.limits().requests_per_connection));
  i->srv->set_pre_routing_handler([p](const httplib::Request& req, httplib::Response& res) { return p->before_body(req, res); });
  // A client that waits for "100 Continue" before sending its body gets the same check
  // first, and a refusal instead of the go-ahead.
  i->srv->set_expect_100_continue_handler([p](const httplib::Request& req, httplib::Response& res) {
    return p->before_body(req, res) == httplib::Server::HandlerResponse::Handled ? res.status : 100;
  });
  auto all = [p](const httplib::Request& req, httplib::Response& res) { p->dispatch(req, res); };
  // One handler for every method and path: authentication comes before any routing, so an
  // unknown path or method without a credential is a 401 too.
  const char* any = ".*";
  i->srv->Get(any, all);
  i->srv->Post(any, all);
  i->srv->Put(any, all);
  i->srv->Patch(any, all);
  i->srv->Delete(any, all);
  i->srv->Options(any, all);
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which would let another
  // process bind the same port and take a share of the connections (and let two heads
  // think they both serve 8266).
  i->srv->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // The ceiling; before_body allows each request far less but the admin's package upload.
  i->srv->set_payload_max_length(static_cast<std::size_t>(options.package_bytes));
  i->host = options.host;
  if (options.port == 0) {
    i->port = i->srv->bind_to_any_port(options.host.c_str());
  } else {
    i->port = i->srv->bind_to_port(options.host.c_str(), options.port) ? options.port : -1;
  }
  if (i->port <= 0)
    return error(error_code::unavailable, "cannot serve HTTP on " + options.host + ":" + std::to_string(options.port) +
                                            " (in use, or not an address of this machine)");
  // Per port: a browser sends a host's cookies to all its ports, and two heads on one host
  // must not take each other's sessions. Under TLS, __Host- also pins it to this host, Secure
  // and Path=/.
  i->cookie = std::string(i->tls ? "__Host-" : "") + std::string(session_cookie) + "_" + std::to_string(i->port);
  i->thread = std::thread([p] { p->srv->listen_after_bind(); });
  // Serving before returning: httplib's stop() does nothing until its loop runs, so a
  // server stopped at once would otherwise leave the loop waiting in accept() for ever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!i->srv->is_running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!i->srv->is_running()) {
    // Its thread may yet start the loop and use `i`: both are left to it (a leak on a path
    // that should not happen) rather than freed under it.
    i->thread.detach();
    (void)i.release();
    return error(error_code::unavailable, "the HTTP server on " + options.host + ":" + std::to_string(i->port) +
                                            " did not start serving within 10 s");
  }
  return std::unique_ptr<server>(new server(std::move(i)));
}

int server::port() const noexcept { return impl_->port; }
bool server::tls() const noexcept { return impl_->tls; }

std::string server::url() const {
  const bool v6 = impl_->host.find(':') != std::string::npos;
  return std::string(impl_->tls ? "https" : "http") + "://" + (v6 ? "[" + impl_->host + "]" : impl_->host) + ":" +
         std::to_string(impl_->port);
}

std::uint64_t server::connections_evicted() const { return impl_->gate.evictions(); }
std::uint64_t server::connections_cut_short() const { return impl_->gate.cut_short(); }
std::string server::cookie_name() const { return impl_->cookie; }

std::map<int, std::uint64_t> server::responses_by_code() const {
  std::lock_guard lock(impl_->m);
  return impl_->by_code;
}

void server::stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  impl_->srv->stop();
  impl_->gate.shutdown_all();  // idle and streaming connections end now, not at their timeouts
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool exposed(const std::string& host) {
  return !(host == "localhost" || host == "::1" || host.starts_with("127."));
}

} // namespace celer::http
