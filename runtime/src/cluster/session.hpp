#pragma once
// Session directories and the other small facts cluster processes share on one machine.
//
//   <temp_dir>/session_<yyyymmdd-hhmmss>_<pid>/
//     address      the head's HOST:PORT
//     token        the cluster token (mode 0600)
//     logs/        head.log, node-<id>.log, worker-<id>.log
//     pids/        <role>-<pid>.pid for each daemon `celer start` left running
//   <temp_dir>/session_latest -> the newest session

#include <celer/error.hpp>
#include <celer/ids.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace celer::cluster {

/// The head's well-known component id: a client that knows HOST:PORT can reach it.
inline constexpr unique_id head_component{0, 1};

struct endpoint_parts {
  std::string host;
  int port = 0;
};
/// Parses "HOST:PORT" (or "tcp://HOST:PORT"); invalid_argument says what is wrong.
expected<endpoint_parts> parse_address(const std::string& address);
/// "tcp://HOST:PORT".
std::string tcp_endpoint(const endpoint_parts& p);

/// The local IP address that routes to `host` (the address peers there can reach us at).
std::string local_ip_towards(const std::string& host);

/// 32 hex digits to an id.
std::filesystem::path temp_root();

struct session {
  std::filesystem::path dir;
  std::string token;
};
/// Creates a new session directory for the cluster at `address` holding `token`, and
/// points session_latest at it.
session create_session(const std::string& address, const std::string& token);
/// The session directory on this machine of the cluster at `address`, if one exists.
std::optional<std::filesystem::path> find_session(const std::string& address);
/// The token to present to the cluster at `address`: the token knob, else the one in this
/// machine's session directory for that cluster. unauthenticated when there is none.
expected<std::string> find_token(const std::string& address);
/// The session directory a process joining `address` logs to: the cluster's own on this
/// machine, else a new one (without a token).
std::filesystem::path session_for_joining(const std::string& address);

/// Records this process as a daemon of the session (for `celer stop`).
std::filesystem::path write_pid_file(const std::filesystem::path& session_dir,
                                     const std::string& role);
/// Every recorded daemon under temp_root(): pid and its pid file.
std::vector<std::pair<int, std::filesystem::path>> recorded_daemons();

/// The absolute path of the running executable.
std::string self_executable();

} // namespace celer::cluster
