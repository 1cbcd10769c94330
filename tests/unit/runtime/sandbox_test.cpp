// Job sandboxes (runtime/src/sandbox): a confined process reaches only its own folders and
// the system's read-only paths, not another process's /proc entries or signals; as root,
// each job runs as a user of its own, claimed once per machine and released with its job.
// Each case forks a real child, confines it, and has it report what the kernel let it do.
#include "jobs/driver_process.hpp"
#include "sandbox/job_sandbox.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <future>
#include <sstream>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace celer;
namespace fs = std::filesystem;

/// Runs `probe` in a child confined by `c` and returns its exit code (the probe's result).
int in_child(const sandbox::confinement& c, const fs::path& cwd, const std::function<int()>& probe) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(100);
    if (c.enter(SIGKILL) != 0) ::_exit(101);
    ::_exit(probe());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
}

/// 0 when `path` opens for reading, else its errno (at most 99).
int open_errno(const std::string& path, int flags = O_RDONLY) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    return 0;
  }
  return errno;
}

std::unique_ptr<sandbox::job_sandbox> landlock_only(const fs::path& job_dir) {
  sandbox::options o;
  o.mode = "landlock";
  o.job_dir = job_dir;
  return sandbox::job_sandbox::detect(o);
}

} // namespace

TEST_CASE("elf_runpath names the directories of the libraries a program was linked with", "[sandbox]") {
  const auto self = fs::read_symlink("/proc/self/exe");
  const auto dirs = sandbox::elf_runpath(self);
  bool found_runtime = false;
  for (const auto& d : dirs) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      if (e.path().filename().string().starts_with("libceler_runtime")) found_runtime = true;
    }
  }
  CHECK(found_runtime);  // the build tree's runtime library, which this test links
  celer_test::temp_dir dir("celer-sandbox");
  std::ofstream(dir.path / "script") << "#!/bin/sh\necho hi\n";
  CHECK(sandbox::elf_runpath(dir.path / "script").empty());
  CHECK(sandbox::elf_runpath(dir.path / "missing").empty());
}

TEST_CASE("a process under Landlock opens files only in its folders and the system's read-only paths", "[sandbox]") {
  if (sandbox::landlock_abi() == 0) {
    WARN("skipped: no Landlock in this kernel");
    return;
  }
  celer_test::temp_dir jobs("celer-sandbox-jobs");
  celer_test::temp_dir elsewhere("celer-sandbox-secret");
  const auto secret = elsewhere.path / "token";
  std::ofstream(secret) << "the cluster's token";
  auto box = landlock_only(jobs.path);
  REQUIRE(box->landlock_abi() > 0);
  const auto job = job_id::random();
  const auto wd = box->folder_of(job) / "wd";
  fs::create_directories(wd);
  auto c = box->confine(job, {.workdir = wd, .tmpdir = box->folder_of(job) / "tmp", .binary = "/bin/true"});
  REQUIRE(c);
  CHECK(c->landlocked());
  CHECK_FALSE(c->drops_user());
  CHECK(in_child(*c, wd, [&] { return open_errno(secret.string()); }) == EACCES);
  CHECK(in_child(*c, wd, [&] { return open_errno((wd / "out").string(), O_WRONLY | O_CREAT); }) == 0);
  CHECK(in_child(*c, wd, [&] { return open_errno((box->folder_of(job) / "tmp" / "x").string(), O_WRONLY | O_CREAT); }) == 0);
  CHECK(in_child(*c, wd, [] { return open_errno("/etc/hostname"); }) == 0);
  CHECK(in_child(*c, wd, [] { return open_errno("/usr/bin/env"); }) == 0);
  CHECK(in_child(*c, wd, [] { return open_errno("/dev/null", O_RDWR); }) == 0);
  // Another job's folder under the same job_dir is not this one's.
  const auto other = box->folder_of(job_id::random());
  fs::create_directories(other);
  std::ofstream(other / "notes") << "another job's";
  CHECK(in_child(*c, wd, [&] { return open_errno((other / "notes").string()); }) == EACCES);
  CHECK(in_child(*c, wd, [&] { return open_errno((jobs.path / "new").string(), O_WRONLY | O_CREAT); }) == EACCES);
}

TEST_CASE("folders an operator names are readable (job_read_paths) or writable (job_write_paths) under Landlock",
          "[sandbox]") {
  if (sandbox::landlock_abi() == 0) {
    WARN("skipped: no Landlock in this kernel");
    return;
  }
  celer_test::temp_dir jobs("celer-sandbox-jobs");
  celer_test::temp_dir data("celer-sandbox-data");
  celer_test::temp_dir out("celer-sandbox-out");
  std::ofstream(data.path / "train.csv") << "x,y\n";
  sandbox::options o;
  o.mode = "landlock";
  o.job_dir = jobs.path;
  o.read_paths = {data.path};
  o.write_paths = {out.path, jobs.path / "not-on-this-machine"};  // a missing one is no error
  auto box = sandbox::job_sandbox::detect(o);
  const auto job = job_id::random();
  const auto wd = box->folder_of(job) / "wd";
  fs::create_directories(wd);
  auto c = box->confine(job, {.workdir = wd, .tmpdir = box->folder_of(job) / "tmp", .binary = "/bin/true"});
  REQUIRE(c);
  CHECK(in_child(*c, wd, [&] { return open_errno((data.path / "train.csv").string()); }) == 0);
  CHECK(in_child(*c, wd, [&] { return open_errno((data.path / "new").string(), O_WRONLY | O_CREAT); }) == EACCES);
  CHECK(in_child(*c, wd, [&] { return open_errno((out.path / "result.csv").string(), O_WRONLY | O_CREAT); }) == 0);
  CHECK(fs::exists(out.path / "result.csv"));
}

TEST_CASE("a process under Landlock cannot read another process's environment or descriptors, nor signal it", "[sandbox]") {
  if (sandbox::landlock_abi() == 0) {
    WARN("skipped: no Landlock in this kernel");
    return;
  }
  celer_test::temp_dir jobs("celer-sandbox-jobs");
  auto box = landlock_only(jobs.path);
  const auto job = job_id::random();
  const auto wd = box->folder_of(job) / "wd";
  fs::create_directories(wd);
  // Both processes run as one user that is not root (root's CAP_SYS_PTRACE passes
  // Landlock's ptrace rule): what stops the confined one is Landlock alone.
  const uid_t user = ::geteuid() == 0 ? 65534 : ::geteuid();
  ::chown(wd.c_str(), user, user);
  ::chown(box->folder_of(job).c_str(), user, user);
  // (A change of user makes a process not dumpable until it execs; a job's process execs.)
  auto as_user = [user] {
    return (::geteuid() == user || (::setresgid(user, user, user) == 0 && ::setresuid(user, user, user) == 0)) &&
           ::prctl(PR_SET_DUMPABLE, 1) == 0;
  };
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t other = ::fork();  // another job's process: unconfined, same user, dumpable
  if (other == 0) {
    if (!as_user()) ::_exit(1);
    (void)!::write(ready[1], "r", 1);
    ::pause();
    ::_exit(0);
  }
  char said = 0;
  REQUIRE(::read(ready[0], &said, 1) == 1);
  ::close(ready[0]);
  ::close(ready[1]);
  const auto proc = "/proc/" + std::to_string(other);
  auto c = box->confine(job, {.workdir = wd, .tmpdir = {}, .binary = "/bin/true"});
  REQUIRE(c);
  auto confined = [&](const std::function<int()>& probe) {
    return in_child(*c, wd, [&] { return as_user() ? probe() : 99; });
  };
  // Its own /proc entries stay readable.
  CHECK(confined([] { return open_errno("/proc/self/environ"); }) == 0);
  // The other process's are not (Landlock's ptrace rule), though its status is public.
  CHECK(confined([&] { return open_errno(proc + "/environ"); }) == EACCES);
  CHECK(confined([&] { return open_errno(proc + "/maps"); }) == EACCES);
  CHECK(confined([&] { return open_errno(proc + "/mem"); }) == EACCES);
  CHECK(confined([&] { return open_errno(proc + "/status"); }) == 0);
  if (box->landlock_abi() >= 6) {
    CHECK(confined([&] { return ::kill(other, 0) == 0 ? 0 : errno; }) == EPERM);
  }
  // Control: the same user unconfined reads it.
  CHECK(in_child(sandbox::confinement{}, wd, [&] { return as_user() ? open_errno(proc + "/environ") : 99; }) == 0);
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
}

TEST_CASE("as root, each job gets a user of its own on the machine, released with its processes when it ends", "[sandbox]") {
  if (::geteuid() != 0) {
    WARN("skipped: only root can run processes as other users");
    return;
  }
  celer_test::temp_dir claims("celer-sandbox-claims");
  sandbox::job_users::config cfg;
  cfg.first = 61184;
  cfg.last = 61186;
  cfg.claims_dir = claims.path / "users";
  auto users = sandbox::job_users::open(cfg);
  REQUIRE(users);
  auto users2 = sandbox::job_users::open(cfg);  // a second daemon on the machine
  REQUIRE(users2);
  const auto j = job_id::random(), k = job_id::random();
  auto uj = (*users)->claim(j);
  auto uk = (*users)->claim(k);
  REQUIRE(uj);
  REQUIRE(uk);
  CHECK(*uj != *uk);
  auto uj2 = (*users2)->claim(j);
  REQUIRE(uj2);
  CHECK(*uj2 == *uj);  // the same job, the same user, whichever daemon asks
  CHECK((*users)->claim(job_id::random()));
  auto none = (*users)->claim(job_id::random());  // three ids, three jobs
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == error_code::unavailable);

  // A process left running as j's user is killed when j ends, and the id is free again.
  int dropped[2];
  REQUIRE(::pipe(dropped) == 0);
  const pid_t left = ::fork();
  if (left == 0) {
    if (::setresgid(*uj, *uj, *uj) != 0 || ::setresuid(*uj, *uj, *uj) != 0) ::_exit(1);
    (void)!::write(dropped[1], "u", 1);
    ::pause();
    ::_exit(0);
  }
  char said = 0;
  REQUIRE(::read(dropped[0], &said, 1) == 1);  // it runs as j's user now
  ::close(dropped[0]);
  ::close(dropped[1]);
  CHECK(sandbox::processes_of(*uj) == std::vector<pid_t>{left});
  CHECK_FALSE((*users2)->release(j, /*kill_left=*/false));  // it still runs: kept, not killed
  CHECK((*users2)->release(j, /*kill_left=*/true));
  int status = 0;
  REQUIRE(::waitpid(left, &status, 0) == left);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  auto again = (*users)->claim(job_id::random());
  REQUIRE(again);
  CHECK(*again == *uj);
}

TEST_CASE("job user ids that a named user holds are refused", "[sandbox]") {
  celer_test::temp_dir claims("celer-sandbox-claims");
  sandbox::job_users::config cfg;
  cfg.first = 0;  // root
  cfg.last = 10;
  cfg.claims_dir = claims.path / "users";
  CHECK_FALSE(sandbox::job_users::open(cfg));
  cfg.first = 65534;  // nobody, on Debian
  cfg.last = 65534;
  auto r = sandbox::job_users::open(cfg);
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("nobody") != std::string::npos);
}

TEST_CASE("as root, a submitted job's driver runs as its job's user, in its own folder, unable to read the session", "[sandbox][jobs]") {
  if (::geteuid() != 0) {
    WARN("skipped: only root can run processes as other users");
    return;
  }
  celer_test::temp_dir session("celer-sandbox-session");
  celer_test::temp_dir jobs("celer-sandbox-jobs");
  celer_test::temp_dir claims("celer-sandbox-claims");
  ::chmod(session.path.c_str(), 0700);
  std::ofstream(session.path / "token") << "the cluster's token";
  ::chmod((session.path / "token").c_str(), 0600);
  sandbox::options o;
  o.job_dir = jobs.path / "j";
  o.users.first = 61190;
  o.users.last = 61199;
  o.users.claims_dir = claims.path / "users";
  auto box = sandbox::job_sandbox::detect(o);
  REQUIRE(box->job_users_on());
  jobs::driver_process_launcher launcher(box.get());
  const auto job = job_id::random();
  jobs::driver_spec spec;
  spec.job = job;
  spec.cwd = box->folder_of(job) / "wd";
  spec.tmpdir = box->folder_of(job) / "tmp";
  fs::create_directories(spec.cwd);
  spec.log = session.path / "driver.log";
  spec.env = {"PATH=/usr/bin:/bin"};
  // Its user, where it runs, whether it can read the token beside its log, whether it can
  // write its own folder.
  spec.argv = {"/bin/sh", "-c",
               "id -u; pwd; cat " + (session.path / "token").string() + " >/dev/null 2>&1 && echo read || echo denied; "
               "echo x > mine && echo wrote"};
  std::promise<int> done;
  auto pid = launcher.start(spec, [&](int, int status) { done.set_value(status); });
  REQUIRE(pid);
  auto exited = done.get_future();
  REQUIRE(exited.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  std::ifstream in(spec.log);
  std::stringstream out;
  out << in.rdbuf();
  std::string uid, cwd, token, wrote;
  out >> uid >> cwd >> token >> wrote;
  CHECK(std::stoul(uid) >= 61190);
  CHECK(std::stoul(uid) <= 61199);
  CHECK(fs::path(cwd) == spec.cwd);
  CHECK(token == "denied");
  CHECK(wrote == "wrote");
  box->job_finished(job, /*kill_left=*/true);
  struct stat st {};
  REQUIRE(::stat(spec.cwd.c_str(), &st) == 0);
  CHECK(st.st_uid == ::geteuid());  // given back: the next job with that id finds nothing
  CHECK_FALSE(fs::exists(spec.tmpdir));
}
