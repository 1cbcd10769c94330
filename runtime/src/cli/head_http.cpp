// The head's HTTP server as the `celer` commands reach it (head_http.hpp).
#include "cli/head_http.hpp"

#include "cli/no_cluster.hpp"
#include "cli/terminal_text.hpp"

#include "cluster/session.hpp"
#include "config/knobs.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

namespace celer::cli {

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "celer: " << printable(what, keep::newlines) << "\n";
  std::exit(1);
}

head_link find_head(std::string address) {
  knob_values k = load_knobs(0, nullptr);
  set_knobs(k);  // temp_dir: where the sessions are
  head_link link;
  const char* job_credential = std::getenv("CELER_JOB_CREDENTIAL");
  if (const char* url = std::getenv("CELER_HEAD_URL"); address.empty() && job_credential != nullptr && url != nullptr && *url != '\0') {
    // Inside a submitted job: the head told the driver its address (its session directory,
    // where the URL is written, may be out of the job's reach), and the job acts as itself.
    link.url = url;
    while (link.url.ends_with("/")) link.url.pop_back();
    if (const char* ca = std::getenv("CELER_TLS_CA"); ca != nullptr) link.ca_cert = ca;
    link.credential = job_credential;
    return link;
  }
  if (address.starts_with("http://") || address.starts_with("https://")) {
    link.url = address;
    while (link.url.ends_with("/")) link.url.pop_back();
    address.clear();
  }
  if (address.empty()) address = k.address;
  std::optional<std::filesystem::path> session;
  if (address.empty()) {
    auto latest = cluster::latest_session();
    if (!latest) fail(latest.error().message());
    session = *latest;
    if (session) address = cluster::session_address(*session);
  } else {
    auto found = cluster::find_session(address);
    if (!found) fail(found.error().message());
    session = *found;
  }
  // A head killed or crashed leaves its session (and its URL) here: say so, not "cannot reach".
  if (job_credential == nullptr) {
    if (auto why = dead_head_message(address)) {
      why->pop_back();  // fail() ends the line
      fail(*why);
    }
  }
  if (link.url.empty()) {
    if (!session)
      fail("no cluster: give --address (the head's HOST:PORT or its http(s):// URL), set CELER_ADDRESS, or start one "
           "with celer start --head");
    std::ifstream in(*session / "http_url");
    std::getline(in, link.url);
    if (link.url.empty())
      fail("the head at " + address + " serves no HTTP (started with --dashboard-port -1?): its jobs API is off");
  }
  if (const char* ca = std::getenv("CELER_TLS_CA"); ca != nullptr && *ca != '\0') {
    link.ca_cert = ca;
  } else if (session && std::filesystem::exists(*session / "http_cert.pem")) {
    link.ca_cert = (*session / "http_cert.pem").string();
  }
  if (job_credential != nullptr) {
    link.credential = job_credential;  // inside a submitted job: it acts as its own job, nothing more
  } else if (auto token = cluster::find_token(address); token) {
    link.credential = *token;
  } else {
    fail(token.error().message());
  }
  return link;
}

std::unique_ptr<httplib::Client> client_for(const head_link& link, std::chrono::seconds read_timeout) {
  auto c = std::make_unique<httplib::Client>(link.url);
  if (!c->is_valid()) fail("not an HTTP address: " + link.url);
  c->set_bearer_token_auth(link.credential);
  if (!link.ca_cert.empty()) c->set_ca_cert_path(link.ca_cert.c_str());
  c->set_connection_timeout(std::chrono::seconds(5));
  c->set_read_timeout(read_timeout);
  c->set_write_timeout(std::chrono::seconds(60));
  return c;
}

/// The body of a JSON answer, or the process ends with the server's own error message.
nlohmann::json expect_json(const httplib::Result& r, const head_link& link, const std::string& doing) {
  if (!r) {
    const bool tls = r.error() == httplib::Error::SSLServerVerification || r.error() == httplib::Error::SSLConnection;
    fail("cannot reach the head at " + link.url + " (" + doing + "): " + httplib::to_string(r.error()) +
         (tls ? " (a certificate this machine does not trust: set CELER_TLS_CA to the head's certificate, a PEM file)" : ""));
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r->body);
  } catch (const std::exception&) {
    fail(doing + ": HTTP " + std::to_string(r->status) + " without a JSON body");
  }
  if (r->status != 200) fail(doing + ": " + j.value("error", "HTTP " + std::to_string(r->status)));
  return j;
}

} // namespace celer::cli
