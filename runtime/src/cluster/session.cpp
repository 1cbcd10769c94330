#include "cluster/session.hpp"

#include "config/knobs.hpp"
#include "transport/zmq_transport.hpp"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <ctime>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace celer::cluster {
namespace fs = std::filesystem;

expected<endpoint_parts> parse_address(const std::string& address) {
  std::string a = address;
  if (a.rfind("tcp://", 0) == 0) a = a.substr(6);
  const auto colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) {
    return error(error_code::invalid_argument,
                 "cluster address '" + address + "' is not HOST:PORT (e.g. 127.0.0.1:6380)");
  }
  endpoint_parts p;
  p.host = a.substr(0, colon);
  const std::string port = a.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p.port);
  if (ec != std::errc() || ptr != port.data() + port.size() || p.port <= 0 || p.port > 65535) {
    return error(error_code::invalid_argument,
                 "cluster address '" + address + "' has no valid port (1-65535)");
  }
  return p;
}

std::string tcp_endpoint(const endpoint_parts& p) {
  return "tcp://" + p.host + ":" + std::to_string(p.port);
}

std::string local_ip_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) return "127.0.0.1";
  std::string out = "127.0.0.1";
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    // Connecting a UDP socket sends nothing; it only asks the kernel for the route.
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof local;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        char buf[INET_ADDRSTRLEN];
        if (::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf) != nullptr) out = buf;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

fs::path temp_root() { return fs::path(knobs().temp_dir); }

namespace {

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

/// What to do about a directory that failed its check.
std::string use_own_dir_hint() {
  return "; or set CELER_TEMP_DIR to a directory of your own (e.g. $XDG_RUNTIME_DIR/celer)";
}

/// Reads a small file that is not a secret (address, pid), never through a symlink; ""
/// when it cannot be read.
std::string read_small_file(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return {};
  std::string s;
  struct stat st{};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char buf[4096];
    ssize_t n = 0;
    while (s.size() < 65536 && (n = ::read(fd, buf, sizeof buf)) > 0) {
      s.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

/// Writes `text` and a newline to `p`, opened with `flags` (O_NOFOLLOW always) and created
/// with `mode` (never readable by others in between).
expected<void> write_file(const fs::path& p, const std::string& text, mode_t mode, int flags) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, mode);
  if (fd < 0) {
    const int err = errno;
    return error(err == ELOOP ? error_code::permission_denied : error_code::unavailable,
                 "cannot create " + p.string() + ": " +
                   (err == ELOOP ? std::string("it is a symbolic link") : std::strerror(err)));
  }
  ::fchmod(fd, mode);
  const std::string line = text + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) return error(error_code::unavailable, "cannot write " + p.string());
  return {};
}

void throw_if_error(const expected<void>& r) {
  if (!r) throw exception(r.error().code(), r.error().message());
}

/// "session_<yyyymmdd-hhmmss>_<pid>".
std::string new_session_name() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return "session_" + std::string(stamp) + "_" + std::to_string(::getpid());
}

bool is_session_name(const std::string& name) {
  return name.rfind("session_2", 0) == 0 && name.find('/') == std::string::npos;
}

std::string normalized(const std::string& address) {
  auto p = parse_address(address);
  return p ? p->host + ":" + std::to_string(p->port) : address;
}

/// The temp root when it exists and is safe; nullopt when it does not exist (nothing to
/// find there, and readers do not create it).
expected<std::optional<fs::path>> existing_private_root() {
  const fs::path root = temp_root();
  struct stat st{};
  if (::lstat(root.c_str(), &st) != 0 && errno == ENOENT) return std::optional<fs::path>{};
  if (auto ok = check_private_dir(root); !ok) return ok.error();
  return std::optional<fs::path>{root};
}

/// Makes a new session directory (with logs/ and pids/) under the checked root.
fs::path make_session_dir(const fs::path& root) {
  // A new directory, never one that exists: a process making two in one second (a head
  // and a session for another cluster) gets "<name>.1".
  const std::string name = new_session_name();
  fs::path dir = root / name;
  for (int n = 1; ::mkdir(dir.c_str(), 0700) != 0; ++n) {
    if (errno != EEXIST || n > 100) {
      throw exception(error_code::unavailable,
                      "cannot create " + dir.string() + ": " + std::strerror(errno));
    }
    dir = root / (name + "." + std::to_string(n));
  }
  ::chmod(dir.c_str(), 0700);  // whatever the umask
  throw_if_error(make_private_dir(dir / "logs"));
  throw_if_error(make_private_dir(dir / "pids"));
  return dir;
}

} // namespace

expected<void> check_private_dir(const fs::path& dir) {
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) {
    const int err = errno;
    return error(err == ENOENT ? error_code::not_found : error_code::unavailable,
                 "cannot use " + dir.string() + ": " + std::strerror(err));
  }
  if (S_ISLNK(st.st_mode)) {
    return error(error_code::permission_denied,
                 dir.string() + " is a symbolic link, not a directory: celer keeps session "
                 "files (the cluster token among them) only in a real directory of its "
                 "user's; remove the link" + use_own_dir_hint());
  }
  if (!S_ISDIR(st.st_mode)) {
    return error(error_code::failed_precondition,
                 dir.string() + " is not a directory; remove it" + use_own_dir_hint());
  }
  if (st.st_uid != ::geteuid()) {
    return error(error_code::permission_denied,
                 dir.string() + " belongs to uid " + std::to_string(st.st_uid) + ", not to you (uid " +
                   std::to_string(::geteuid()) + "): its owner could read or replace celer's "
                   "session files there (the cluster token among them); chown it to "
                   "yourself if it is yours" + use_own_dir_hint());
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return error(error_code::permission_denied,
                 dir.string() + " is writable by " +
                   ((st.st_mode & S_IWOTH) != 0 ? "everyone" : "its group") + " (mode " +
                   octal_mode(st.st_mode) + "): others could replace celer's session files "
                   "there; run chmod 700 " + dir.string() + use_own_dir_hint());
  }
  return {};
}

expected<void> make_private_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) {
    ::chmod(dir.c_str(), 0700);  // whatever the umask
    return {};
  }
  if (errno != EEXIST) {
    return error(error_code::unavailable,
                 "cannot create " + dir.string() + ": " + std::strerror(errno) +
                   use_own_dir_hint());
  }
  return check_private_dir(dir);
}

expected<fs::path> private_temp_root() {
  const fs::path root = temp_root();
  if (root.empty()) return error(error_code::invalid_argument, "the temp_dir knob is empty");
  // The parents (/tmp) are not ours to check; a missing parent is made as usual.
  if (root.has_parent_path() && root.parent_path() != root) {
    std::error_code ec;
    fs::create_directories(root.parent_path(), ec);
  }
  if (auto ok = make_private_dir(root); !ok) return ok.error();
  return root;
}

expected<std::string> read_secret_file(const fs::path& file, follow_symlinks follow) {
  const int flags =
    O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow == follow_symlinks::yes ? 0 : O_NOFOLLOW);
  const int fd = ::open(file.c_str(), flags);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP && follow == follow_symlinks::no) {
      return error(error_code::permission_denied,
                   "refusing the token file " + file.string() +
                     ": it is a symbolic link (celer reads secrets in its session directory "
                     "only from real files); remove it");
    }
    return error(err == ENOENT ? error_code::not_found : error_code::permission_denied,
                 "cannot read the token file " + file.string() + ": " + std::strerror(err));
  }
  struct stat st{};
  std::string why;
  if (::fstat(fd, &st) != 0) {
    why = std::string("cannot stat it: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "it is not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    why = "it belongs to uid " + std::to_string(st.st_uid) + ", not to you (uid " +
          std::to_string(::geteuid()) + "); copy it into a file of your own with mode 0600";
  } else if ((st.st_mode & 077) != 0) {
    const bool others = (st.st_mode & 007) != 0;
    why = "its mode " + octal_mode(st.st_mode) + " lets " + (others ? "everyone" : "its group") +
          " " + ((st.st_mode & (others ? 004 : 040)) != 0 ? "read" : "change") +
          " it; run chmod 600 " + file.string();
  }
  if (!why.empty()) {
    ::close(fd);
    return error(error_code::permission_denied,
                 "refusing the token file " + file.string() + ": " + why);
  }
  std::string s;
  char buf[1024];
  ssize_t n = 0;
  while (s.size() < 65536 && (n = ::read(fd, buf, sizeof buf)) > 0) {
    s.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  s = s.substr(0, s.find('\n'));
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && blank(s.back())) s.pop_back();
  std::size_t first = 0;
  while (first < s.size() && blank(s[first])) ++first;
  return s.substr(first);
}

expected<void> write_new_file(const fs::path& file, const std::string& text, unsigned mode) {
  return write_file(file, text, static_cast<mode_t>(mode), O_EXCL);
}

namespace {

// session_latest is replaced atomically: a relative link made under a temporary name in
// our own (checked) root, renamed over the old one.
void point_latest_at(const fs::path& root, const fs::path& dir) {
  const fs::path latest = root / "session_latest";
  const fs::path tmp = root / ("session_latest." + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_directory_symlink(dir.filename(), tmp, ec);
  if (!ec) fs::rename(tmp, latest, ec);
}

} // namespace

session create_session(const std::string& address, const std::string& token) {
  auto root = private_temp_root();
  if (!root) throw exception(root.error().code(), root.error().message());
  session s;
  s.dir = make_session_dir(*root);
  s.token = token;
  throw_if_error(write_new_file(s.dir / "token", s.token, 0600));
  throw_if_error(write_new_file(s.dir / "address", normalized(address), 0644));
  point_latest_at(*root, s.dir);
  return s;
}

session resume_session(const std::string& address) {
  auto found = find_session(address);
  if (!found) throw exception(found.error().code(), found.error().message());
  if (!*found) {
    throw exception(error_code::not_found,
                    "no session of a head at " + normalized(address) + " under " +
                      temp_root().string() + " to resume; start it without --resume");
  }
  session s;
  s.dir = **found;
  auto token = read_secret_file(s.dir / "token", follow_symlinks::no);
  if (!token || token->empty()) {
    throw exception(token ? error_code::not_found : token.error().code(),
                    "the session " + s.dir.string() + " has no token to resume with" +
                      (token ? std::string() : ": " + token.error().message()));
  }
  s.token = *token;
  auto root = private_temp_root();
  if (!root) throw exception(root.error().code(), root.error().message());
  point_latest_at(*root, s.dir);
  // The pid file of the head that died (SIGKILL leaves it): gone, so that celer stop never
  // signals whatever process reuses its pid.
  std::error_code ec;
  for (const auto& p : fs::directory_iterator(s.dir / "pids", ec)) {
    if (p.path().filename().string().rfind("head-", 0) != 0) continue;
    const std::string text = read_small_file(p.path());
    int pid = 0;
    (void)std::from_chars(text.data(), text.data() + text.size(), pid);
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(p.path(), ec);
  }
  return s;
}

expected<std::optional<fs::path>> latest_session() {
  auto root = existing_private_root();
  if (!root) return root.error();
  if (!*root) return std::optional<fs::path>{};
  const fs::path latest = **root / "session_latest";
  struct stat st{};
  if (::lstat(latest.c_str(), &st) != 0) return std::optional<fs::path>{};
  // The root is ours and no one else can write it, so this holds unless someone with our
  // uid (or root) put something odd there; refuse rather than follow it anywhere.
  const auto refuse = [&](const std::string& why) {
    return error(error_code::permission_denied,
                 "refusing " + latest.string() + ": " + why + "; remove it (the next "
                 "celer start --head makes it again)");
  };
  if (!S_ISLNK(st.st_mode)) return refuse("it is not a symbolic link");
  if (st.st_uid != ::geteuid()) {
    return refuse("it belongs to uid " + std::to_string(st.st_uid) + ", not to you");
  }
  std::error_code ec;
  const fs::path target = fs::read_symlink(latest, ec);
  if (ec) return refuse(ec.message());
  // Only a session directory right in the root: no "..", no absolute path, no subpath.
  if (target.is_absolute() || !is_session_name(target.string())) {
    return refuse("it points to " + target.string() + ", not to a session directory beside it");
  }
  const fs::path dir = **root / target;
  if (auto ok = check_private_dir(dir); !ok) {
    if (ok.error().code() == error_code::not_found) return std::optional<fs::path>{};
    return ok.error();
  }
  return std::optional<fs::path>{dir};
}

std::string session_address(const fs::path& session_dir) {
  return read_small_file(session_dir / "address");
}

expected<std::optional<fs::path>> find_session(const std::string& address) {
  const std::string want = normalized(address);
  auto latest = latest_session();
  if (!latest) return latest.error();
  if (*latest && session_address(**latest) == want) return *latest;
  auto root = existing_private_root();
  if (!root) return root.error();
  if (!*root) return std::optional<fs::path>{};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(**root, ec)) {
    if (!is_session_name(e.path().filename().string())) continue;
    if (!check_private_dir(e.path())) continue;  // not one of ours
    if (session_address(e.path()) == want) return std::optional<fs::path>{e.path()};
  }
  return std::optional<fs::path>{};
}

expected<std::string> find_token(const std::string& address) {
  if (!knobs().token.empty()) return knobs().token;
  auto dir = find_session(address);
  if (!dir) return dir.error();
  if (*dir) {
    auto t = read_secret_file(**dir / "token", follow_symlinks::no);
    if (t && !t->empty()) return *t;
    if (!t && t.error().code() != error_code::not_found) return t.error();
  }
  return error(error_code::unauthenticated,
               "no token for the cluster at " + address + ": set CELER_TOKEN in the "
               "environment (celer start also takes --token-file PATH or --token-stdin), "
               "or run on the head's machine where " +
                 (temp_root() / "session_latest/token").string() + " holds it");
}

fs::path session_for_joining(const std::string& address) {
  auto found = find_session(address);
  if (!found) throw exception(found.error().code(), found.error().message());
  if (*found) return **found;
  auto root = private_temp_root();
  if (!root) throw exception(root.error().code(), root.error().message());
  const fs::path dir = make_session_dir(*root);
  throw_if_error(write_new_file(dir / "address", normalized(address), 0644));
  return dir;
}

fs::path write_pid_file(const fs::path& session_dir, const std::string& role) {
  const fs::path p = session_dir / "pids" / (role + "-" + std::to_string(::getpid()) + ".pid");
  // O_TRUNC, not O_EXCL: a stale file of a reused pid is simply replaced.
  throw_if_error(write_file(p, std::to_string(::getpid()), 0644, O_TRUNC));
  return p;
}

expected<std::vector<std::pair<int, fs::path>>> recorded_daemons() {
  std::vector<std::pair<int, fs::path>> out;
  auto root = existing_private_root();
  if (!root) return root.error();
  if (!*root) return out;
  std::error_code ec;
  for (const auto& s : fs::directory_iterator(**root, ec)) {
    if (!is_session_name(s.path().filename().string())) continue;
    if (!check_private_dir(s.path()) || !check_private_dir(s.path() / "pids")) continue;
    for (const auto& p : fs::directory_iterator(s.path() / "pids", ec)) {
      const std::string text = read_small_file(p.path());
      int pid = 0;
      auto [ptr, perr] = std::from_chars(text.data(), text.data() + text.size(), pid);
      if (perr == std::errc() && pid > 0) out.emplace_back(pid, p.path());
    }
  }
  return out;
}

std::optional<int> dead_head(const fs::path& session_dir) {
  std::optional<int> gone;
  std::error_code ec;
  for (const auto& p : fs::directory_iterator(session_dir / "pids", ec)) {
    if (p.path().filename().string().rfind("head-", 0) != 0) continue;
    const std::string text = read_small_file(p.path());
    int pid = 0;
    auto [ptr, perr] = std::from_chars(text.data(), text.data() + text.size(), pid);
    if (perr != std::errc() || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno == EPERM) {
      // Alive; a pid reused by another program does not count as the head.
      const std::string cmd = read_small_file("/proc/" + std::to_string(pid) + "/cmdline");
      if (cmd.find("celer") != std::string::npos) return std::nullopt;
    }
    gone = pid;
  }
  return gone;
}

expected<void> accepts_connections(const endpoint_parts& p, std::chrono::milliseconds timeout) {
  const std::string where = p.host + ":" + std::to_string(p.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(p.host.c_str(), std::to_string(p.port).c_str(), &hints, &res);
      rc != 0 || res == nullptr) {
    return error(error_code::invalid_argument,
                 "cannot resolve the host of " + where + ": " + ::gai_strerror(rc));
  }
  std::string why = "the connection was refused";
  bool ok = false;
  for (const addrinfo* a = res; a != nullptr && !ok; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd pfd{fd, POLLOUT, 0};
      const int n = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
      int err = 0;
      socklen_t len = sizeof err;
      if (n == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        ok = true;
      } else if (n == 0) {
        why = "no connection was made within " + std::to_string(timeout.count()) + " ms";
      } else if (err != 0 && err != ECONNREFUSED) {
        why = std::strerror(err);
      }
    } else if (errno != ECONNREFUSED) {
      why = std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (ok) return {};
  return error(error_code::unavailable, "nothing answers at " + where + ": " + why);
}

std::string self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

} // namespace celer::cluster
