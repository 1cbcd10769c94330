#include "sandbox/job_sandbox.hpp"

#include "log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include <elf.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

// Debian 12's kernel headers stop at Landlock ABI 2; later ABIs' bits are the kernel's, not
// the headers', so they are spelled here (include/uapi/linux/landlock.h).
namespace {
constexpr std::uint64_t ll_execute = 1ULL << 0;
constexpr std::uint64_t ll_write_file = 1ULL << 1;
constexpr std::uint64_t ll_read_file = 1ULL << 2;
constexpr std::uint64_t ll_read_dir = 1ULL << 3;
constexpr std::uint64_t ll_abi1_all = (1ULL << 13) - 1;  // execute .. make_sym
constexpr std::uint64_t ll_refer = 1ULL << 13;            // ABI 2
constexpr std::uint64_t ll_truncate = 1ULL << 14;         // ABI 3
constexpr std::uint64_t ll_ioctl_dev = 1ULL << 15;        // ABI 5
constexpr std::uint64_t ll_scope_signal = 1ULL << 1;      // ABI 6
/// Rights that make sense on a file (not a directory) in a path_beneath rule.
constexpr std::uint64_t ll_file_rights = ll_execute | ll_write_file | ll_read_file | ll_truncate | ll_ioctl_dev;

/// struct landlock_ruleset_attr as of ABI 6 (the kernel takes the size we give).
struct ruleset_attr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};
struct __attribute__((packed)) path_beneath_attr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};
constexpr int rule_path_beneath = 1;  // LANDLOCK_RULE_PATH_BENEATH
} // namespace

namespace celer::sandbox {

namespace fs = std::filesystem;

int landlock_abi() {
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

std::vector<fs::path> elf_runpath(const fs::path& program) {
  std::ifstream in(program, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > 4096)
    return {};
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  in.seekg(static_cast<std::streamoff>(eh.e_shoff));
  if (!in.read(reinterpret_cast<char*>(sections.data()), static_cast<std::streamsize>(sections.size() * sizeof(Elf64_Shdr))))
    return {};
  std::vector<fs::path> out;
  for (const auto& s : sections) {
    if (s.sh_type != SHT_DYNAMIC || s.sh_link >= sections.size() || s.sh_size > (1u << 20)) continue;
    const auto& strtab = sections[s.sh_link];
    std::vector<Elf64_Dyn> dyn(s.sh_size / sizeof(Elf64_Dyn));
    in.seekg(static_cast<std::streamoff>(s.sh_offset));
    if (!in.read(reinterpret_cast<char*>(dyn.data()), static_cast<std::streamsize>(dyn.size() * sizeof(Elf64_Dyn))))
      return {};
    for (const auto& d : dyn) {
      if ((d.d_tag != DT_RUNPATH && d.d_tag != DT_RPATH) || d.d_un.d_val >= strtab.sh_size) continue;
      // Only the one string: a sanitizer build's .dynstr runs to tens of MiB.
      std::string value(std::min<std::uint64_t>(strtab.sh_size - d.d_un.d_val, 64 * 1024), '\0');
      in.seekg(static_cast<std::streamoff>(strtab.sh_offset + d.d_un.d_val));
      if (!in.read(value.data(), static_cast<std::streamsize>(value.size()))) return {};
      std::stringstream paths(std::string(value.c_str()));
      for (std::string p; std::getline(paths, p, ':');) {
        for (const char* origin : {"$ORIGIN", "${ORIGIN}"}) {
          if (const auto at = p.find(origin); at != std::string::npos)
            p.replace(at, std::strlen(origin), program.parent_path().string());
        }
        if (!p.empty()) out.emplace_back(p);
      }
    }
  }
  return out;
}

// -- confinement

confinement::~confinement() {
  if (ruleset_ >= 0) ::close(ruleset_);
}

confinement::confinement(confinement&& other) noexcept
  : ruleset_(std::exchange(other.ruleset_, -1)), drop_(other.drop_), uid_(other.uid_), gid_(other.gid_) {}

confinement& confinement::operator=(confinement&& other) noexcept {
  if (this != &other) {
    if (ruleset_ >= 0) ::close(ruleset_);
    ruleset_ = std::exchange(other.ruleset_, -1);
    drop_ = other.drop_;
    uid_ = other.uid_;
    gid_ = other.gid_;
  }
  return *this;
}

int confinement::enter(int deathsig) const noexcept {
  if (drop_) {
    if (::setgroups(0, nullptr) != 0) return errno;
    if (::setresgid(gid_, gid_, gid_) != 0) return errno;
    if (::setresuid(uid_, uid_, uid_) != 0) return errno;
  }
  // A change of user clears the parent-death signal; the caller checks getppid() again.
  if (deathsig != 0 && ::prctl(PR_SET_PDEATHSIG, deathsig) != 0) return errno;
  if (!drop_ && ruleset_ < 0) return 0;  // unconfined (job_isolation=off)
  // No set-user-id program gives a job's process back what it gave up.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (ruleset_ >= 0 && ::syscall(SYS_landlock_restrict_self, ruleset_, 0) != 0) return errno;
  return 0;
}

// -- job_sandbox

std::unique_ptr<job_sandbox> job_sandbox::detect(options o) {
  std::unique_ptr<job_sandbox> box(new job_sandbox());
  box->o_ = std::move(o);
  const auto& mode = box->o_.mode;
  if (mode == "off") {
    box->description_ = "none (job_isolation=off: jobs run as this daemon's user, unconfined)";
    return box;
  }
  std::string no_users;
  if (mode == "auto") {
    if (::geteuid() != 0) {
      no_users = "not root, so no user per job";
    } else if (auto users = job_users::open(box->o_.users)) {
      box->users_ = std::move(*users);
    } else {
      no_users = "no user per job: " + users.error().message();
      CELER_LOG(warn, "sandbox", "jobs run as root's user: " + users.error().message());
    }
  } else if (mode != "landlock") {
    CELER_LOG(warn, "sandbox", "job_isolation=" + mode + " is not auto, landlock or off: taken as auto");
    box->o_.mode = "auto";
    return detect(box->o_);
  } else {
    no_users = "job_isolation=landlock";
  }
  box->abi_ = sandbox::landlock_abi();
  if (!box->o_.job_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(box->o_.job_dir, ec);
    ::chmod(box->o_.job_dir.c_str(), box->users_ ? 0711 : 0700);
  }
  std::string text;
  if (box->users_) {
    text = "a user per job (" + std::to_string(box->o_.users.first) + "-" + std::to_string(box->o_.users.last) + ")";
  }
  if (box->abi_ > 0) {
    text += (text.empty() ? "" : " and ") + std::string("Landlock (ABI ") + std::to_string(box->abi_) +
            (box->abi_ >= 6 ? ", signals scoped)" : ", signals not scoped before ABI 6)");
  }
  if (text.empty()) text = "none";
  if (!no_users.empty()) text += "; " + no_users;
  if (!box->users_ && ::geteuid() == 0)
    text += "; jobs run as root, whose capabilities pass Landlock's ptrace rule: other processes' environments are open to them";
  if (box->abi_ == 0) text += "; no Landlock in this kernel";
  box->description_ = text;
  return box;
}

namespace {

/// Adds a rule granting `access` under `path` (masked to a file's rights when it is not a
/// directory). A path that does not exist is skipped.
expected<void> allow(int ruleset, const fs::path& path, std::uint64_t access, std::uint64_t handled) {
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return {};  // not on this machine: nothing to allow
  struct stat st {};
  if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= ll_file_rights;
  path_beneath_attr rule{.allowed_access = access & handled, .parent_fd = fd};
  const long rc = rule.allowed_access == 0 ? 0 : ::syscall(SYS_landlock_add_rule, ruleset, rule_path_beneath, &rule, 0);
  const int err = errno;
  ::close(fd);
  if (rc != 0)
    return error(error_code::internal, "Landlock refused a rule for " + path.string() + ": " + std::strerror(err));
  return {};
}

/// `binary` as a path: a bare name is looked up in PATH's value.
fs::path locate(const std::string& binary, const std::string& path_env, const fs::path& workdir) {
  if (binary.empty()) return {};
  if (binary.find('/') != std::string::npos) return binary.front() == '/' ? fs::path(binary) : workdir / binary;
  std::stringstream dirs(path_env.empty() ? std::string("/usr/local/bin:/usr/bin:/bin") : path_env);
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path p = fs::path(d.empty() ? "." : d) / binary;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

/// Hands `dir` and everything under it to `uid` (not following links).
void give(const fs::path& dir, uid_t uid, gid_t gid) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || (st.st_uid == uid && st.st_gid == gid)) return;  // gone, or given already
  ::lchown(dir.c_str(), uid, gid);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    ::lchown(it->path().c_str(), uid, gid);
  }
}

/// Makes `dir` readable (and its folders and programs enterable) by every user, writable by
/// none but its owner: a package copy that several jobs' users run in.
void share(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || (st.st_mode & 0005) == 0005) return;  // gone, or shared already
  auto readable = [](const fs::path& p, const struct stat& s) {
    mode_t m = (s.st_mode & 07777 & ~mode_t{0022}) | 0444;
    if (S_ISDIR(s.st_mode) || (s.st_mode & 0111) != 0) m |= 0111;
    ::chmod(p.c_str(), m);
  };
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat s {};
    if (::lstat(it->path().c_str(), &s) == 0 && !S_ISLNK(s.st_mode)) readable(it->path(), s);
  }
  readable(dir, st);  // last: it marks the whole folder done
}

} // namespace

expected<confinement> job_sandbox::confine(const job_id& job, const request& r) {
  confinement c;
  if (!active()) return c;
  std::error_code ec;
  if (!r.tmpdir.empty()) {
    fs::create_directories(r.tmpdir, ec);
    if (ec) return error(error_code::unavailable, "cannot make the job's temporary directory " + r.tmpdir.string() + ": " + ec.message());
    ::chmod(r.tmpdir.c_str(), 0700);
  }
  if (users_) {
    auto uid = users_->claim(job);
    if (!uid) return uid.error();
    c.drop_ = true;
    c.uid_ = *uid;
    c.gid_ = static_cast<gid_t>(*uid);
    if (const auto own = folder_of(job); !o_.job_dir.empty() && fs::is_directory(own, ec)) {
      ::lchown(own.c_str(), c.uid_, c.gid_);
      ::chmod(own.c_str(), 0700);
    }
    if (!r.workdir.empty()) {
      if (r.workdir_shared) {
        share(r.workdir);
      } else {
        give(r.workdir, c.uid_, c.gid_);
      }
    }
    if (!r.tmpdir.empty()) give(r.tmpdir, c.uid_, c.gid_);
  }
  if (abi_ <= 0) return c;
  std::uint64_t handled = ll_abi1_all;
  if (abi_ >= 2) handled |= ll_refer;
  if (abi_ >= 3) handled |= ll_truncate;
  if (abi_ >= 5) handled |= ll_ioctl_dev;
  // The kernel takes a larger struct than it knows when the bytes past its own are zero.
  ruleset_attr attr{.handled_access_fs = handled, .handled_access_net = 0, .scoped = abi_ >= 6 ? ll_scope_signal : 0};
  const long fd = ::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (fd < 0) return error(error_code::internal, std::string("cannot make a Landlock ruleset: ") + std::strerror(errno));
  c.ruleset_ = static_cast<int>(fd);
  const std::uint64_t read_exec = ll_read_file | ll_read_dir | ll_execute;
  const std::uint64_t device = ll_read_file | ll_write_file | ll_ioctl_dev;
  // The system's read-only paths. /proc is readable: its entries that matter (environ, fd/,
  // mem, maps of another process) need ptrace access, which Landlock refuses to processes
  // outside the job's domain. Not /run, /tmp, /var or /home: other users' and daemons' files.
  std::vector<std::pair<fs::path, std::uint64_t>> rules = {
    {"/usr", read_exec},   {"/lib", read_exec},  {"/lib64", read_exec},      {"/lib32", read_exec},
    {"/libx32", read_exec}, {"/bin", read_exec}, {"/sbin", read_exec},       {"/opt", read_exec},
    {"/etc", read_exec},   {"/sys", read_exec},  {"/proc", read_exec},
    {"/run/systemd/resolve", read_exec},  // /etc/resolv.conf's target on systemd machines
    {"/dev/null", device}, {"/dev/zero", device}, {"/dev/full", device},      {"/dev/random", device},
    {"/dev/urandom", device}, {"/dev/tty", device},
  };
  // GPUs: the NVIDIA driver's device files, and DRM's.
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    const auto name = e.path().filename().string();
    if (name.starts_with("nvidia") || name == "dri") rules.emplace_back(e.path(), device | ll_read_dir);
  }
  for (const auto& p : o_.read_paths) rules.emplace_back(p, read_exec);
  for (const auto& p : o_.write_paths) rules.emplace_back(p, handled);
  for (const auto& p : r.read_also) rules.emplace_back(p, read_exec);
  // The program and the libraries it names.
  const fs::path program = locate(r.binary, r.path_env, r.workdir);
  if (!program.empty()) {
    rules.emplace_back(program.parent_path(), read_exec);
    for (const auto& p : elf_runpath(program)) rules.emplace_back(p, read_exec);
  }
  if (!r.workdir.empty()) rules.emplace_back(r.workdir, r.workdir_shared ? read_exec : handled);
  if (!r.tmpdir.empty()) rules.emplace_back(r.tmpdir, handled);
  for (const auto& [path, access] : rules) {
    if (auto ok = allow(c.ruleset_, path, access, handled); !ok) return ok.error();
  }
  return c;
}

std::string confinement::label() const {
  std::string out = drop_ ? "user " + std::to_string(uid_) : std::string();
  if (ruleset_ >= 0) out += out.empty() ? "Landlock" : ", Landlock";
  return out;
}

void job_sandbox::job_finished(const job_id& job, bool kill_left) {
  if (users_ && !users_->release(job, kill_left)) return;
  if (o_.job_dir.empty()) return;
  const auto own = folder_of(job);
  std::error_code ec;
  fs::remove_all(own / "tmp", ec);
  if (users_ && fs::exists(own, ec)) give(own, ::geteuid(), ::getegid());
}

} // namespace celer::sandbox
