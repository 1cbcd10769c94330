// The head's HTTP server (server.hpp), on cpp-httplib (Debian's libcpp-httplib, built with
// OpenSSL).
#include "http/server.hpp"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
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

} // namespace

struct server::impl {
  std::unique_ptr<httplib::Server> srv;
  bool tls = false;
  std::string host;
  int port = 0;
  authenticator auth;
  std::vector<std::pair<route, std::regex>> routes;
  std::thread thread;
  mutable std::mutex m;
  std::map<int, std::uint64_t> by_code;
  std::atomic<bool> stopped{false};

  explicit impl(authenticator a) : auth(std::move(a)) {}

  /// Every answer celer gives goes through here, counted before it is sent (so a client
  /// that has its answer sees it counted).
  void reply(httplib::Response& res, const response& r) {
    {
      std::lock_guard lock(m);
      ++by_code[r.status];
    }
    res.status = r.status;
    for (const auto& [k, v] : r.headers) res.set_header(k, v);
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    if (!r.stream) {
      res.set_content(r.body, r.content_type.c_str());
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
    std::string escaped;
    for (char c : message) {
      if (c == '"' || c == '\\') escaped += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
    }
    return "{\"error\":\"" + escaped + "\"}";
  }

  static bool wants_html(const httplib::Request& req) {
    return req.get_header_value("Accept").find("text/html") != std::string::npos;
  }

  /// A refusal: JSON for programs; for a browser (Accept: text/html) the login page, with
  /// the same status.
  void refuse(const httplib::Request& req, httplib::Response& res, int status, const std::string& message) {
    response r{.status = status, .body = error_body(message)};
    if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"celer\"");
    if (wants_html(req)) {
      r.content_type = "text/html; charset=utf-8";
      r.body = login_page(status == 401 ? "" : message);
      r.headers.emplace_back("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'");
    }
    reply(res, r);
  }

  std::string session_cookie_header(const std::string& value, std::chrono::seconds max_age) const {
    return std::string(session_cookie) + "=" + value + "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" +
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
    const auto id = cookie_value(req.get_header_value("Cookie"), session_cookie);
    if (!id.empty()) auth.sessions().close(id);
    response r{.status = wants_html(req) ? 303 : 204, .body = {}};
    r.headers.emplace_back("Set-Cookie", session_cookie_header("", std::chrono::seconds(0)));
    if (r.status == 303) r.headers.emplace_back("Location", "/");
    reply(res, r);
  }

  /// Every request, whatever its method and path: authenticate, then find the route. Only
  /// POST /api/login goes first: it carries its credential in its body.
  void dispatch(const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/api/login" && req.method == "POST") return login(req, res);
    const auto verdict = auth.check(req.get_header_value("Authorization"), req.get_header_value("Cookie"));
    if (verdict.status != 200) return refuse(req, res, verdict.status, verdict.message);
    if (req.path == "/api/logout" && req.method == "POST") return logout(req, res);
    bool path_known = false;
    for (const auto& [rt, re] : routes) {
      std::smatch match;
      if (!std::regex_match(req.path, match, re)) continue;
      path_known = true;
      if (rt.method != req.method) continue;
      request r{.method = req.method, .path = req.path, .captures = {}, .query = {}, .body = req.body, .who = *verdict.who};
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
  auto i = std::make_unique<impl>(std::move(auth));
  for (auto& r : routes) {
    try {
      std::regex re(r.pattern);
      i->routes.emplace_back(std::move(r), std::move(re));
    } catch (const std::regex_error& e) {
      return error(error_code::invalid_argument, "route pattern '" + r.pattern + "': " + e.what());
    }
  }
  if (!options.tls_cert.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(), options.tls_key.c_str());
    if (!ssl->is_valid())
      return error(error_code::invalid_argument, "the TLS certificate " + options.tls_cert + " or key " + options.tls_key +
                                                   " does not load (PEM files, the key matching the certificate)");
    i->srv = std::move(ssl);
    i->tls = true;
  } else {
    i->srv = std::make_unique<httplib::Server>();
  }
  auto* p = i.get();
  const int threads = std::max(1, options.threads);
  i->srv->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
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
  // A working directory's package is the largest body (jobs::pack_options::limit_bytes).
  i->srv->set_payload_max_length(160u << 20);
  i->host = options.host;
  if (options.port == 0) {
    i->port = i->srv->bind_to_any_port(options.host.c_str());
  } else {
    i->port = i->srv->bind_to_port(options.host.c_str(), options.port) ? options.port : -1;
  }
  if (i->port <= 0)
    return error(error_code::unavailable, "cannot serve HTTP on " + options.host + ":" + std::to_string(options.port) +
                                            " (in use, or not an address of this machine)");
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

std::map<int, std::uint64_t> server::responses_by_code() const {
  std::lock_guard lock(impl_->m);
  return impl_->by_code;
}

void server::stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  impl_->srv->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool exposed(const std::string& host) {
  return !(host == "localhost" || host == "::1" || host.starts_with("127."));
}

} // namespace celer::http
