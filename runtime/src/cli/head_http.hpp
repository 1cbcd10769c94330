#pragma once
// The `celer` commands that speak to the head's HTTP server (jobs_cli.cpp, state_cli.cpp):
// where it is, what to present to it, and its answers as JSON. A failure ends the process
// with the server's own message.

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace celer::cli {

/// Where the head's HTTP server is and what to present to it.
struct head_link {
  std::string url;
  std::string credential;
  /// For https: a PEM file of the certificates to trust beyond the system's (CELER_TLS_CA,
  /// else the head's own certificate from its session on this machine); empty: the system's.
  std::string ca_cert;
};

/// Prints "celer: <what>" and exits 1.
[[noreturn]] void fail(const std::string& what);

/// The head at `address`: its HOST:PORT (this machine's session for it gives the URL and the
/// token), its http(s):// URL, or empty (CELER_ADDRESS, else the latest session). Inside a
/// submitted job, the job's own credential.
head_link find_head(std::string address);

std::unique_ptr<httplib::Client> client_for(const head_link& link, std::chrono::seconds read_timeout);

/// The body of a JSON answer; any other status ends the process with the server's error.
nlohmann::json expect_json(const httplib::Result& r, const head_link& link, const std::string& doing);

} // namespace celer::cli
