// Session directories and token files: made private, and refused when someone else could
// read or replace them (a shared /tmp/celer, symlinks, loose modes).
#include "cluster/session.hpp"
#include "config/knobs.hpp"

#include <celer/error.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace celer;
using Catch::Matchers::Contains;

namespace {

/// A scratch directory; the temp_dir knob points at `root` (not yet made) inside it while
/// this lives.
struct scratch_root {
  fs::path base;
  fs::path root;
  knob_values saved = knobs();
  scratch_root() {
    char tmpl[] = "/tmp/celer-session-test.XXXXXX";
    base = ::mkdtemp(tmpl);
    root = base / "root";
    knob_values k = saved;
    k.temp_dir = root.string();
    k.token.clear();
    set_knobs(k);
  }
  ~scratch_root() {
    set_knobs(saved);
    std::error_code ec;
    fs::remove_all(base, ec);
  }
};

unsigned mode_of(const fs::path& p) {
  struct stat st{};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

void write_text(const fs::path& p, const std::string& text, unsigned mode) {
  std::ofstream(p) << text;
  fs::permissions(p, static_cast<fs::perms>(mode), fs::perm_options::replace);
}

} // namespace

TEST_CASE("a new temp root, its session directories and the token file are private",
          "[session][security]") {
  scratch_root s;
  const auto made = cluster::create_session("127.0.0.1:6390", "secret-token-0123456789");
  CHECK(mode_of(s.root) == 0700);
  CHECK(mode_of(made.dir) == 0700);
  CHECK(mode_of(made.dir / "logs") == 0700);
  CHECK(mode_of(made.dir / "pids") == 0700);
  CHECK(mode_of(made.dir / "token") == 0600);
  auto latest = cluster::latest_session();
  REQUIRE(latest);
  REQUIRE(*latest);
  CHECK(**latest == made.dir);
  CHECK(cluster::session_address(made.dir) == "127.0.0.1:6390");
  auto token = cluster::find_token("127.0.0.1:6390");
  REQUIRE(token);
  CHECK(*token == "secret-token-0123456789");

  const fs::path joined = cluster::session_for_joining("127.0.0.1:6391");  // another cluster
  CHECK(joined != made.dir);
  CHECK(mode_of(joined) == 0700);
  CHECK(mode_of(joined / "logs") == 0700);
}

TEST_CASE("a temp root that others can write is refused with what to do", "[session][security]") {
  scratch_root s;
  fs::create_directory(s.root);
  for (const unsigned mode : {0777u, 0775u, 01777u}) {
    ::chmod(s.root.c_str(), mode);
    auto r = cluster::private_temp_root();
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == error_code::permission_denied);
    CHECK_THAT(r.error().message(), Contains(s.root.string()) && Contains("chmod 700") &&
                                      Contains("CELER_TEMP_DIR"));
    REQUIRE_THROWS_AS(cluster::create_session("127.0.0.1:6390", "t"), exception);
    // Readers refuse it too: its session files could be anyone's.
    CHECK_FALSE(cluster::find_token("127.0.0.1:6390"));
    CHECK_FALSE(cluster::recorded_daemons());
  }
  ::chmod(s.root.c_str(), 0755);  // others may read and enter, but not write
  CHECK(cluster::private_temp_root());
}

TEST_CASE("a symlink in place of the temp root or a session directory is refused",
          "[session][security]") {
  scratch_root s;
  fs::create_directory(s.base / "elsewhere", s.base);
  ::chmod((s.base / "elsewhere").c_str(), 0700);
  fs::create_directory_symlink(s.base / "elsewhere", s.root);
  auto r = cluster::private_temp_root();
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == error_code::permission_denied);
  CHECK_THAT(r.error().message(), Contains(s.root.string()) && Contains("symbolic link"));
  CHECK_FALSE(cluster::check_private_dir(s.root));
  CHECK(cluster::check_private_dir(s.base / "elsewhere"));
}

TEST_CASE("a temp root owned by another user is refused", "[session][security]") {
  if (::geteuid() != 0) {
    WARN("skipped: only root can make a directory owned by another user");
    return;
  }
  scratch_root s;
  fs::create_directory(s.root);
  ::chmod(s.root.c_str(), 0700);
  REQUIRE(::chown(s.root.c_str(), 65534, 65534) == 0);
  auto r = cluster::private_temp_root();
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == error_code::permission_denied);
  CHECK_THAT(r.error().message(), Contains(s.root.string()) && Contains("uid 65534") &&
                                    Contains("chown") && Contains("CELER_TEMP_DIR"));
}

TEST_CASE("a symlinked token file in a session directory is refused", "[session][security]") {
  scratch_root s;
  const auto made = cluster::create_session("127.0.0.1:6390", "the-real-token-0123");
  write_text(s.base / "planted", "planted-token", 0600);
  fs::remove(made.dir / "token");
  fs::create_symlink(s.base / "planted", made.dir / "token");
  auto token = cluster::find_token("127.0.0.1:6390");
  REQUIRE_FALSE(token);
  CHECK(token.error().code() == error_code::permission_denied);
  CHECK_THAT(token.error().message(), Contains("symbolic link"));
}

TEST_CASE("a token file in a session directory that others can read is refused",
          "[session][security]") {
  scratch_root s;
  const auto made = cluster::create_session("127.0.0.1:6390", "the-real-token-0123");
  ::chmod((made.dir / "token").c_str(), 0644);
  auto token = cluster::find_token("127.0.0.1:6390");
  REQUIRE_FALSE(token);
  CHECK_THAT(token.error().message(), Contains("chmod 600"));
}

TEST_CASE("session_latest is followed only to a session directory beside it",
          "[session][security]") {
  scratch_root s;
  const auto made = cluster::create_session("127.0.0.1:6390", "the-real-token-0123");
  const fs::path latest = s.root / "session_latest";
  REQUIRE(cluster::latest_session());

  fs::create_directory(s.base / "session_20990101-000000_1");
  ::chmod((s.base / "session_20990101-000000_1").c_str(), 0700);
  for (const fs::path& target :
       {fs::path("../session_20990101-000000_1"), s.base / "session_20990101-000000_1",
        fs::path("/etc"), fs::path("session_20990101-000000_1/..")}) {
    fs::remove(latest);
    fs::create_directory_symlink(target, latest);
    auto r = cluster::latest_session();
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == error_code::permission_denied);
    CHECK_THAT(r.error().message(), Contains("session_latest"));
  }
  fs::remove(latest);
  fs::create_directory(latest);  // a real directory, not a link
  CHECK_FALSE(cluster::latest_session());
  fs::remove(latest);
  auto none = cluster::latest_session();  // no link at all: no session
  REQUIRE(none);
  CHECK_FALSE(*none);
  // The session is still found by its address.
  auto found = cluster::find_session("127.0.0.1:6390");
  REQUIRE(found);
  REQUIRE(*found);
  CHECK(**found == made.dir);
}

TEST_CASE("a token file is read only when it is its user's and no one else's",
          "[session][security]") {
  scratch_root s;
  const fs::path file = s.base / "token";
  write_text(file, "  0123456789abcdef0123456789abcdef \nsecond line\n", 0600);
  auto ok = cluster::read_secret_file(file, cluster::follow_symlinks::yes);
  REQUIRE(ok);
  CHECK(*ok == "0123456789abcdef0123456789abcdef");

  for (const unsigned mode : {0644u, 0640u, 0604u, 0660u, 0602u}) {
    ::chmod(file.c_str(), mode);
    auto r = cluster::read_secret_file(file, cluster::follow_symlinks::yes);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == error_code::permission_denied);
    CHECK_THAT(r.error().message(), Contains(file.string()) && Contains("chmod 600"));
  }
  ::chmod(file.c_str(), 0400);
  CHECK(cluster::read_secret_file(file, cluster::follow_symlinks::yes));

  // A link the user named is followed (the checks apply to the file it reaches); a link is
  // never followed where celer itself looks (follow_symlinks::no).
  fs::create_symlink(file, s.base / "link");
  CHECK(cluster::read_secret_file(s.base / "link", cluster::follow_symlinks::yes));
  auto link = cluster::read_secret_file(s.base / "link", cluster::follow_symlinks::no);
  REQUIRE_FALSE(link);
  CHECK_THAT(link.error().message(), Contains("symbolic link"));

  auto missing = cluster::read_secret_file(s.base / "missing", cluster::follow_symlinks::yes);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == error_code::not_found);
  auto dir = cluster::read_secret_file(s.base, cluster::follow_symlinks::yes);
  REQUIRE_FALSE(dir);
  CHECK_THAT(dir.error().message(), Contains("not a regular file"));

  if (::geteuid() == 0) {
    ::chmod(file.c_str(), 0600);
    REQUIRE(::chown(file.c_str(), 65534, 65534) == 0);
    auto other = cluster::read_secret_file(file, cluster::follow_symlinks::yes);
    REQUIRE_FALSE(other);
    CHECK_THAT(other.error().message(), Contains("uid 65534"));
  }
}

TEST_CASE("a new secret file is never written through a symlink or over a file",
          "[session][security]") {
  scratch_root s;
  write_text(s.base / "victim", "untouched", 0644);
  fs::create_symlink(s.base / "victim", s.base / "token");
  CHECK_FALSE(cluster::write_new_file(s.base / "token", "secret", 0600));
  write_text(s.base / "existing", "old", 0644);
  CHECK_FALSE(cluster::write_new_file(s.base / "existing", "secret", 0600));
  std::ifstream in(s.base / "victim");
  std::string text;
  std::getline(in, text);
  CHECK(text == "untouched");
  REQUIRE(cluster::write_new_file(s.base / "fresh", "secret", 0600));
  CHECK(mode_of(s.base / "fresh") == 0600);
}

TEST_CASE("pid files are recorded for celer stop, never through a symlink",
          "[session][security]") {
  scratch_root s;
  const auto made = cluster::create_session("127.0.0.1:6390", "the-real-token-0123");
  const auto pid_file = cluster::write_pid_file(made.dir, "head");
  auto daemons = cluster::recorded_daemons();
  REQUIRE(daemons);
  REQUIRE(daemons->size() == 1);
  CHECK(daemons->front().first == ::getpid());
  fs::remove(pid_file);
  write_text(s.base / "other", "1", 0644);  // pid 1 must never be signalled by celer stop
  fs::create_symlink(s.base / "other", pid_file);
  daemons = cluster::recorded_daemons();
  REQUIRE(daemons);
  CHECK(daemons->empty());
  REQUIRE_THROWS_AS(cluster::write_pid_file(made.dir, "head"), exception);
  std::ifstream in(s.base / "other");
  std::string text;
  std::getline(in, text);
  CHECK(text == "1");
}

TEST_CASE("a head resumed at its address takes back its session and token, and no other",
          "[session][fault]") {
  scratch_root s;
  const auto first = cluster::create_session("127.0.0.1:6390", "token-of-the-first-cluster");
  const auto other = cluster::create_session("127.0.0.1:6391", "token-of-another-cluster-");
  // The first head died by SIGKILL: its pid file stayed, naming a process that is gone.
  const pid_t child = ::fork();
  if (child == 0) std::_Exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  write_text(first.dir / "pids" / ("head-" + std::to_string(child) + ".pid"),
             std::to_string(child), 0644);
  const fs::path live = cluster::write_pid_file(first.dir, "head");  // this process: kept

  const auto resumed = cluster::resume_session("127.0.0.1:6390");
  CHECK(resumed.dir == first.dir);
  CHECK(resumed.token == "token-of-the-first-cluster");
  auto latest = cluster::latest_session();
  REQUIRE(latest);
  REQUIRE(*latest);
  CHECK(**latest == first.dir);  // drivers and nodes on this machine find it again
  CHECK_FALSE(fs::exists(first.dir / "pids" / ("head-" + std::to_string(child) + ".pid")));
  CHECK(fs::exists(live));
  CHECK(cluster::resume_session("127.0.0.1:6391").dir == other.dir);
  try {
    (void)cluster::resume_session("127.0.0.1:6392");
    FAIL("resumed a session that does not exist");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::not_found);
    CHECK_THAT(std::string(e.what()), Contains("without --resume"));
  }
}
