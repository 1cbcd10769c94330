#pragma once
// Session directories and the other small facts cluster processes share on one machine.
//
//   <temp_dir>/                      mode 0700, ours (checked before every use)
//     session_<yyyymmdd-hhmmss>_<pid>/ mode 0700
//       address      the head's HOST:PORT
//       token        the cluster token (mode 0600)
//       logs/        head.log, node-<id>.log, worker-<id>.log
//       pids/        <role>-<pid>.pid for each daemon `celer start` left running
//       head/        the head's tables (RocksDB), which a head started with --resume loads
//     session_latest -> session_<...> (a relative link to the newest session)
//
// The temp root is often shared (/tmp/celer), so nothing there is trusted until checked:
// a directory is used only when lstat says it is a real directory owned by this process's
// effective user and writable by no one else; files are opened with O_NOFOLLOW, and secret
// files are created with O_EXCL and read only when owned by us with no group/other bits.

#include <celer/error.hpp>
#include <celer/ids.hpp>

#include <chrono>
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

/// The temp root as configured (knob temp_dir), unchecked: for messages.
std::filesystem::path temp_root();
/// The temp root, made (mode 0700) when missing, else checked with check_private_dir.
[[nodiscard]] expected<std::filesystem::path> private_temp_root();

/// Checks that `dir` is a directory (lstat: a symlink is refused, even to a good one), owned
/// by this process's effective user and not writable by group or others. permission_denied
/// (or not_found, failed_precondition) names the path and what to do about it.
[[nodiscard]] expected<void> check_private_dir(const std::filesystem::path& dir);
/// Makes `dir` with mode 0700, or checks it with check_private_dir when it exists.
[[nodiscard]] expected<void> make_private_dir(const std::filesystem::path& dir);

enum class follow_symlinks : bool { no, yes };
/// The first line of a secret file (a token), without surrounding blanks. Refused unless
/// it is a regular file owned by this process's effective user with no group or other
/// permission bits (as ssh does for keys); the checks are made on the opened file. A
/// symlink is followed only with follow_symlinks::yes (a path the user named); files in
/// session directories are read with no. not_found when it does not exist.
[[nodiscard]] expected<std::string> read_secret_file(const std::filesystem::path& file,
                                                     follow_symlinks follow);
/// Creates `file` (which must not exist, and is never a symlink) with `mode` and writes
/// `text` and a newline to it.
[[nodiscard]] expected<void> write_new_file(const std::filesystem::path& file,
                                            const std::string& text, unsigned mode);

struct session {
  std::filesystem::path dir;
  std::string token;
};
/// Creates a new session directory for the cluster at `address` holding `token`, and
/// points session_latest at it. Throws celer::exception when the temp root is not safe
/// to use (see private_temp_root) or a file cannot be made.
session create_session(const std::string& address, const std::string& token);
/// The session directory of the head that last served at `address` on this machine, with
/// its token, for a head started again there (`celer start --head --resume`): its tables,
/// logs and token are the old head's, so nodes and drivers reconnect with the keys they
/// hold. Points session_latest at it. Throws celer::exception: not_found when there is no
/// such session (or it has no token), or as create_session.
session resume_session(const std::string& address);
/// The newest session directory (where session_latest points, once checked), if any.
/// An error when the temp root or the link is not safe to follow.
[[nodiscard]] expected<std::optional<std::filesystem::path>> latest_session();
/// The HOST:PORT recorded in `session_dir`, or "" when it has none.
std::string session_address(const std::filesystem::path& session_dir);
/// The session directory on this machine of the cluster at `address`, if one exists.
/// An error when the temp root is not safe to use.
[[nodiscard]] expected<std::optional<std::filesystem::path>> find_session(
  const std::string& address);
/// The token to present to the cluster at `address`: the token knob, else the one in this
/// machine's session directory for that cluster. unauthenticated when there is none;
/// permission_denied when the session directory or token file is not safe to trust.
expected<std::string> find_token(const std::string& address);
/// The session directory a process joining `address` logs to: the cluster's own on this
/// machine, else a new one (without a token). Throws celer::exception as create_session.
std::filesystem::path session_for_joining(const std::string& address);

/// Records this process as a daemon of the session (for `celer stop`).
std::filesystem::path write_pid_file(const std::filesystem::path& session_dir,
                                     const std::string& role);
/// The pid of the head recorded in `session_dir` when that head is gone: every head pid file
/// there names a process that no longer runs (killed with SIGKILL, or crashed: a clean stop
/// removes its file) or that is not celer. nullopt when a recorded head runs, or none is
/// recorded (`celer stop` ran; the address then says whether anything answers).
std::optional<int> dead_head(const std::filesystem::path& session_dir);

/// Whether anything accepts a TCP connection at `p` within `timeout`: a plain connect,
/// closed at once without a word, for a process that has no token to say hello with.
/// unavailable ("nothing answers at HOST:PORT: ...") when the connection is refused or not
/// made in time; invalid_argument when the host cannot be resolved.
[[nodiscard]] expected<void> accepts_connections(const endpoint_parts& p,
                                                 std::chrono::milliseconds timeout);

/// Every recorded daemon under temp_root(): pid and its pid file. An error when the temp
/// root is not safe to use (its pid files could name anyone's processes).
[[nodiscard]] expected<std::vector<std::pair<int, std::filesystem::path>>> recorded_daemons();

/// The absolute path of the running executable.
std::string self_executable();

} // namespace celer::cluster
