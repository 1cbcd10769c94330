#include "jobs/job_manager.hpp"

#include "jobs/entrypoint.hpp"
#include "jobs/package.hpp"
#include "log.hpp"
#include "protocol/env_vars.hpp"
#include "child_reaper.hpp"  // describe_exit

#include <algorithm>
#include <csignal>
#include <fstream>
#include <regex>
#include <sstream>

#include <sys/wait.h>

namespace celer::jobs {
namespace {

constexpr const char* jobs_table = "submitted_jobs";

bool valid_submission_id(const std::string& s) {
  static const std::regex re("[A-Za-z0-9_.-]{1,64}");
  return std::regex_match(s, re);
}

std::string random_hex16() { return unique_id::random().hex().substr(0, 16); }

/// "1 CPU, 1 GPU".
std::string resources_text(double cpus, double gpus) {
  auto num = [](double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  return num(cpus) + " CPU, " + num(gpus) + " GPU";
}

} // namespace

const char* job_state_name(job_state s) noexcept {
  switch (s) {
    case job_state::pending: return "PENDING";
    case job_state::running: return "RUNNING";
    case job_state::succeeded: return "SUCCEEDED";
    case job_state::failed: return "FAILED";
    case job_state::stopped: return "STOPPED";
  }
  return "UNKNOWN";
}

std::unordered_set<job_id> job_manager::submitted(store::table_db& db) {
  std::unordered_set<job_id> ids;
  (void)db.scan(jobs_table, [&](std::string_view key, std::string_view) {
    if (auto id = unique_id::from_bytes(key)) ids.insert(job_id(*id));
  });
  return ids;
}

job_manager::job_manager(job_manager_config cfg, driver_launcher& launcher, job_hooks hooks,
                         std::shared_ptr<store::table_db> db, clock now)
  : cfg_(std::move(cfg)), launcher_(launcher), hooks_(std::move(hooks)), db_(std::move(db)),
    now_(now ? std::move(now) : clock([] { return std::chrono::system_clock::now(); })) {
  if (!db_) return;
  std::vector<job_record> rows;
  auto ok = db_->scan(jobs_table, [&](std::string_view, std::string_view value) {
    try {
      rows.push_back(detail::unpack<job_record>(value, jobs_table));
    } catch (const std::exception& e) {
      CELER_LOG(error, "jobs", std::string("skipped an unreadable job record: ") + e.what());
    }
  });
  if (!ok) CELER_LOG(error, "jobs", "cannot read the job records: " + ok.error().message());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.sequence < b.sequence; });
  for (auto& r : rows) {
    next_sequence_ = std::max(next_sequence_, r.sequence + 1);
    if (!terminal(r.status())) {
      // Its driver ran under the previous head and stopped with it (it dies with the head).
      r.state = static_cast<std::uint8_t>(job_state::failed);
      r.message = "the head stopped while the job ran (its driver stopped with it)";
      r.ended_ms = now_ms();
      r.exit_code = -1;
      persist(r);
    }
    order_.push_back(r.id);
    jobs_[r.id] = entry{std::move(r), std::nullopt};
  }
}

job_manager::~job_manager() { stop_waiters(); }

void job_manager::stop_waiters() {
  std::unique_lock lock(mutex_);
  shutting_down_ = true;
  changed_.notify_all();
  // Jobs still waiting for their resources end STOPPED (await_resources).
  auto waiters = std::move(waiters_);
  lock.unlock();
  for (auto& t : waiters) t.join();
}

std::int64_t job_manager::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now_().time_since_epoch()).count();
}

std::filesystem::path job_manager::folder(const job_id& job) const { return cfg_.jobs_dir / job.hex(); }

void job_manager::persist(const job_record& r) {
  if (!db_) return;
  if (auto ok = db_->put(jobs_table, r.id.bytes(), detail::pack(r)); !ok)
    CELER_LOG(error, "jobs", "could not persist job " + r.submission_id + ": " + ok.error().message() +
                               "; a restarted head would not know this change");
}

expected<job_record> job_manager::submit(const submit_request& r, const asker& who) {
  if (!who.admin)
    return error(error_code::permission_denied, "only the cluster's token submits jobs; job " + who.job.short_hex() +
                                                  "'s credential acts on its own job only");
  if (r.argv.empty() || r.argv.front().empty())
    return error(error_code::invalid_argument, "the entrypoint is empty: give the program to run");
  for (const auto& [k, v] : r.env) {
    if (!protocol::env_name_valid(k))
      return error(error_code::invalid_argument, "environment variable name '" + k + "' is not [A-Za-z_][A-Za-z0-9_]*");
    if (k.starts_with("CELER_") && k != "CELER_LOG_LEVEL" && !k.starts_with("CELER_PEER_"))
      return error(error_code::invalid_argument, "environment variable " + k +
                                                   " is the runtime's to set; pass knobs as flags of the program instead");
  }
  if (!r.package.empty() && !has_package(r.package))
    return error(error_code::not_found, "no uploaded working directory " + r.package + " (PUT /api/packages/<digest> first)");
  if (!r.submission_id.empty() && !valid_submission_id(r.submission_id))
    return error(error_code::invalid_argument, "submission id '" + r.submission_id + "' is not 1 to 64 of [A-Za-z0-9_.-]");
  if (r.num_cpus < 0 || r.num_gpus < 0)
    return error(error_code::invalid_argument, "entrypoint_num_cpus and entrypoint_num_gpus cannot be negative");
  if (r.namespaces.size() > 64)
    return error(error_code::invalid_argument, "at most 64 namespaces a job, got " + std::to_string(r.namespaces.size()));
  for (const auto& n : r.namespaces) {
    if (n.empty() || n.size() > 256 || n == "*" || n.find('\n') != std::string::npos)
      return error(error_code::invalid_argument, "namespace '" + n.substr(0, 64) +
                                                   "' is not a name of 1 to 256 characters (no newline, not '*')");
  }
  std::unique_lock lock(mutex_);
  if (shutting_down_) return error(error_code::unavailable, "the head is stopping");
  std::string sid = r.submission_id.empty() ? "celersubmit_" + random_hex16() : r.submission_id;
  for (const auto& [id, e] : jobs_)
    if (e.record.submission_id == sid)
      return error(error_code::already_exists, "a job with submission id " + sid + " exists already (" +
                                                 job_state_name(e.record.status()) + ")");
  entry e;
  e.record.id = job_id::random();
  const bool reserve = hooks_.reserve && (r.num_cpus > 0 || r.num_gpus > 0);
  if (reserve) {
    // The head knows the job before it holds resources for it; asked without the lock.
    lock.unlock();
    if (hooks_.started) hooks_.started(e.record.id, r.namespaces);
    auto group = hooks_.reserve(e.record.id, r.num_cpus, r.num_gpus);
    if (!group) {
      if (hooks_.ended) hooks_.ended(e.record.id);
      if (group.error().code() == error_code::unavailable)
        return error(error_code::unavailable, "cannot reserve the entrypoint's resources now: " + group.error().message());
      return error(error_code::invalid_argument, "the entrypoint's resources (" + resources_text(r.num_cpus, r.num_gpus) +
                                                   ") can never be reserved: " + group.error().message());
    }
    e.record.group = *group;
    lock.lock();
    for (const auto& [id, other] : jobs_)
      if (other.record.submission_id == sid) {
        if (hooks_.ended) hooks_.ended(e.record.id);
        return error(error_code::already_exists, "a job with submission id " + sid + " exists already");
      }
  }
  e.record.submission_id = std::move(sid);
  e.record.argv = r.argv;
  e.record.env = r.env;
  e.record.metadata = r.metadata;
  e.record.num_cpus = r.num_cpus;
  e.record.num_gpus = r.num_gpus;
  e.record.priority = r.priority;
  e.record.package = r.package;
  e.record.namespaces = r.namespaces;
  e.record.submitted_ms = now_ms();
  e.record.sequence = next_sequence_++;
  e.record.message = "starting the driver";
  const job_id id = e.record.id;
  order_.push_back(id);
  auto& stored = jobs_[id] = std::move(e);
  if (reserve) {
    stored.record.message = "waiting for the entrypoint's resources (" + resources_text(r.num_cpus, r.num_gpus) + ")";
    persist(stored.record);
    waiters_.emplace_back([this, id] { await_resources(id); });
    return stored.record;
  }
  persist(stored.record);
  job_record pending = stored.record;
  lock.unlock();
  // Unpacking and starting take time: without the lock (the entry stays, being PENDING).
  launch(std::move(pending));
  lock.lock();
  changed_.notify_all();
  return jobs_.at(id).record;
}

void job_manager::await_resources(job_id id) {
  std::unique_lock lock(mutex_);
  for (;;) {
    auto& rec = jobs_.at(id).record;
    if (rec.stop_requested || shutting_down_) {
      rec.state = static_cast<std::uint8_t>(job_state::stopped);
      rec.message = "stopped before it started (it was waiting for the entrypoint's resources)";
      rec.ended_ms = now_ms();
      persist(rec);
      changed_.notify_all();
      lock.unlock();
      if (hooks_.ended) hooks_.ended(id);  // the head removes its placement group
      return;
    }
    std::string why;
    lock.unlock();
    auto node = hooks_.reserved ? hooks_.reserved(rec.group, why) : std::optional<node_id>(node_id{});
    lock.lock();
    auto& now = jobs_.at(id).record;
    if (node && !now.stop_requested && !shutting_down_) {
      now.entrypoint_node = *node;
      job_record pending = now;
      lock.unlock();
      launch(std::move(pending));
      lock.lock();
      changed_.notify_all();
      return;
    }
    if (!why.empty() && now.message.find(why) == std::string::npos) {
      now.message = "waiting for the entrypoint's resources (" + resources_text(now.num_cpus, now.num_gpus) + "): " + why;
    }
    changed_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

void job_manager::launch(job_record rec) {
  const auto dir = folder(rec.id);
  const auto own = cfg_.job_dir.empty() ? dir : cfg_.job_dir / rec.id.hex();
  const auto wd = own / "wd";
  std::error_code ec;
  for (const auto& d : {dir, own}) {
    std::filesystem::create_directories(d, ec);
    std::filesystem::permissions(d, std::filesystem::perms::owner_all, ec);
  }
  const job_id id = rec.id;
  // The record as the launch left it, unless the driver already exited (exited() won).
  auto settle = [&](job_state state, std::string why, int pid) {
    std::lock_guard lock(mutex_);
    auto& stored = jobs_.at(id).record;
    if (stored.status() != job_state::pending) return;
    stored.state = static_cast<std::uint8_t>(state);
    stored.message = std::move(why);
    if (state == job_state::running) {
      stored.pid = pid;
      stored.started_ms = now_ms();
      if (shutting_down_) {  // started as the head stops: stop it with the others
        stored.stop_requested = true;
        launcher_.signal(pid, SIGTERM);
      }
    } else {
      stored.ended_ms = now_ms();
      CELER_LOG(warn, "jobs", "job " + stored.submission_id + " failed to start: " + stored.message);
      if (hooks_.ended) hooks_.ended(id);  // its key, and any entrypoint resources held for it, go
    }
    persist(stored);
  };
  if (!rec.package.empty()) {
    std::ifstream in(cfg_.packages_dir / rec.package, std::ios::binary);
    const std::string archive((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (auto ok = unpack(archive, wd, cfg_.unpack_limit); !ok)
      return settle(job_state::failed, "cannot unpack the working directory: " + ok.error().message(), 0);
  } else {
    std::filesystem::create_directories(wd, ec);
  }
  auto secret = cfg_.creds.job_secret_hex(id);
  if (!secret) return settle(job_state::failed, "cannot issue the job's credential: " + secret.error().message(), 0);
  driver_spec spec{id, rec.argv, cfg_.base_env, wd, dir / "driver.log", own / "tmp"};
  // Its own temporary directory, unless the submission names one.
  std::erase_if(spec.env, [](const std::string& e) { return e.starts_with("TMPDIR="); });
  if (!rec.env.contains("TMPDIR")) spec.env.push_back("TMPDIR=" + spec.tmpdir.string());
  std::string inherited;  // CELER_ENV_VARS: the names its workers get too
  for (const auto& [k, v] : rec.env) {
    spec.env.push_back(k + "=" + v);
    if (!protocol::env_name_reserved(k)) inherited += (inherited.empty() ? "" : ",") + k;
  }
  if (!inherited.empty()) spec.env.push_back("CELER_ENV_VARS=" + inherited);
  spec.env.push_back("CELER_ADDRESS=" + cfg_.cluster_address);
  spec.env.push_back("CELER_JOB_ID=" + id.hex());
  spec.env.push_back("CELER_JOB_CREDENTIAL=" + *secret);
  spec.env.push_back("CELER_CLUSTER_KEY=" + cfg_.creds.cluster_public_hex());
  spec.env.push_back("CELER_SUBMISSION_ID=" + rec.submission_id);
  spec.env.push_back(std::string("CELER_ENCRYPTION=") + (cfg_.encrypt ? "1" : "0"));
  spec.env.push_back("CELER_JOB_PRIORITY=" + std::to_string(rec.priority));
  if (!cfg_.node_ip.empty()) spec.env.push_back("CELER_NODE_IP=" + cfg_.node_ip);
  const auto http = [this] {
    std::lock_guard lock(mutex_);
    return http_;
  }();
  if (!http.url.empty()) spec.env.push_back("CELER_HEAD_URL=" + http.url);
  if (!http.ca_cert.empty() && !rec.env.contains("CELER_TLS_CA")) {
    // The driver's user may not read the head's copy; its temporary directory becomes its own.
    const auto copy = spec.tmpdir / "head_cert.pem";
    std::filesystem::create_directories(spec.tmpdir, ec);
    std::filesystem::copy_file(http.ca_cert, copy, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) {
      CELER_LOG(warn, "jobs", "cannot copy the head's certificate for job " + rec.submission_id + " (" + ec.message() +
                                "): its `celer` commands need CELER_TLS_CA");
    } else {
      spec.env.push_back("CELER_TLS_CA=" + copy.string());
    }
  }
  if (!rec.package.empty()) {
    // Its workers run in a copy of the same folder on their nodes, and a program inside it
    // is named from there (cluster/process_wiring.cpp).
    spec.env.push_back("CELER_JOB_PACKAGE=" + rec.package);
    spec.env.push_back("CELER_JOB_WORKING_DIR=" + wd.string());
  }
  if (!rec.group.nil()) {
    spec.env.push_back("CELER_ENTRYPOINT_PLACEMENT_GROUP=" + rec.group.hex());
    spec.env.push_back("CELER_ENTRYPOINT_NODE=" + rec.entrypoint_node.hex());
  }
  // Its default namespace: the first it is let into.
  if (!rec.namespaces.empty()) spec.env.push_back("CELER_NAMESPACE=" + rec.namespaces.front());
  if (hooks_.started) hooks_.started(id, rec.namespaces);
  auto pid = launcher_.start(spec, [this, id](int pid, int status) { exited(id, pid, status); });
  if (!pid) return settle(job_state::failed, pid.error().message(), 0);
  settle(job_state::running, "the driver runs as pid " + std::to_string(*pid), *pid);
  CELER_LOG(info, "jobs", "job " + rec.submission_id + " (" + id.short_hex() + ") started: " + join_entrypoint(rec.argv));
}

void job_manager::serve_http(std::string url, std::filesystem::path ca_cert) {
  std::lock_guard lock(mutex_);
  http_.url = std::move(url);
  http_.ca_cert = std::move(ca_cert);
}

void job_manager::exited(const job_id& job, int pid, int status) {
  std::unique_lock lock(mutex_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  auto& rec = it->second.record;
  // Whatever the driver left running in its process group goes with it.
  launcher_.signal(pid, SIGKILL);
  rec.pid = pid;
  rec.ended_ms = now_ms();
  rec.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rec.stop_requested) {
    rec.state = static_cast<std::uint8_t>(job_state::stopped);
    rec.message = "stopped: the driver " + describe_exit(status);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    rec.state = static_cast<std::uint8_t>(job_state::succeeded);
    rec.message = "the driver exited with status 0";
  } else {
    rec.state = static_cast<std::uint8_t>(job_state::failed);
    rec.message = "the driver " + describe_exit(status);
  }
  it->second.kill_at.reset();
  persist(rec);
  CELER_LOG(info, "jobs", "job " + rec.submission_id + " " + job_state_name(rec.status()) + ": " + rec.message);
  if (hooks_.ended) hooks_.ended(job);
  changed_.notify_all();
}

job_manager::entry* job_manager::lookup(const std::string& id, const asker& who) {
  return const_cast<entry*>(std::as_const(*this).lookup(id, who));
}

const job_manager::entry* job_manager::lookup(const std::string& id, const asker& who) const {
  const entry* found = nullptr;
  if (auto j = job_id::parse(id)) {
    if (auto it = jobs_.find(*j); it != jobs_.end()) found = &it->second;
  }
  if (found == nullptr) {
    for (const auto& [_, e] : jobs_)
      if (e.record.submission_id == id) found = &e;
  }
  if (found != nullptr && !who.admin && found->record.id != who.job) return nullptr;
  return found;
}

std::vector<job_record> job_manager::list(const asker& who) const {
  std::lock_guard lock(mutex_);
  std::vector<job_record> out;
  for (const auto& id : order_) {
    const auto& e = jobs_.at(id);
    if (who.admin || e.record.id == who.job) out.push_back(e.record);
  }
  return out;
}

expected<job_record> job_manager::find(const std::string& id, const asker& who) const {
  std::lock_guard lock(mutex_);
  const auto* e = lookup(id, who);
  if (e == nullptr) return error(error_code::not_found, "no job " + id);
  return e->record;
}

expected<bool> job_manager::stop(const std::string& id, const asker& who) {
  std::lock_guard lock(mutex_);
  auto* e = lookup(id, who);
  if (e == nullptr) return error(error_code::not_found, "no job " + id);
  auto& rec = e->record;
  if (rec.status() == job_state::pending && !rec.group.nil()) {
    rec.stop_requested = true;  // await_resources ends it
    changed_.notify_all();
    return true;
  }
  if (rec.status() != job_state::running) return false;
  if (!rec.stop_requested) {
    rec.stop_requested = true;
    rec.message = std::string("stopping: asked by ") + (who.admin ? "the admin" : "the job itself");
    e->kill_at = now_() + cfg_.stop_grace;
    persist(rec);
    launcher_.signal(rec.pid, SIGTERM);
  }
  changed_.notify_all();
  return true;
}

expected<void> job_manager::remove(const std::string& id, const asker& who) {
  if (!who.admin)
    return error(error_code::permission_denied, "only the cluster's token deletes jobs; a job's credential may stop its own");
  std::lock_guard lock(mutex_);
  auto* e = lookup(id, who);
  if (e == nullptr) return error(error_code::not_found, "no job " + id);
  if (!terminal(e->record.status()))
    return error(error_code::failed_precondition, std::string("job ") + id + " is " + job_state_name(e->record.status()) +
                                                    ": stop it first (celer job stop " + id + ")");
  const job_id jid = e->record.id;
  std::error_code ec;
  std::filesystem::remove_all(folder(jid), ec);
  if (db_) {
    if (auto ok = db_->erase(jobs_table, jid.bytes()); !ok)
      return error(ok.error().code(), "cannot delete the record of job " + id + ": " + ok.error().message());
  }
  jobs_.erase(jid);
  std::erase(order_, jid);
  changed_.notify_all();
  return {};
}

expected<log_page> job_manager::log_range(const std::string& id, const asker& who, std::uint64_t from,
                                          std::uint64_t max_bytes) const {
  std::filesystem::path log;
  {
    std::lock_guard lock(mutex_);
    const auto* e = lookup(id, who);
    if (e == nullptr) return error(error_code::not_found, "no job " + id);
    log = folder(e->record.id) / "driver.log";
  }
  log_page page;
  page.offset = from;
  std::ifstream in(log, std::ios::binary);
  if (!in) return page;
  in.seekg(0, std::ios::end);
  page.size = static_cast<std::uint64_t>(std::max<std::streamoff>(0, in.tellg()));
  if (from >= page.size) return page;
  page.text.resize(static_cast<std::size_t>(std::min(max_bytes, page.size - from)));
  in.seekg(static_cast<std::streamoff>(from));
  in.read(page.text.data(), static_cast<std::streamsize>(page.text.size()));
  page.text.resize(static_cast<std::size_t>(std::max<std::streamsize>(0, in.gcount())));
  // A character cut by the page's end goes to the next page whole: walk back over at most
  // three continuation bytes to its lead byte and see whether all of it is here.
  if (!page.text.empty() && from + page.text.size() < page.size) {
    std::size_t lead = page.text.size();
    for (int back = 0; back < 4 && lead > 0; ++back) {
      const auto b = static_cast<unsigned char>(page.text[lead - 1]);
      --lead;
      if ((b & 0xC0) != 0x80) break;  // not a continuation byte: the lead (or ASCII)
    }
    const auto b = static_cast<unsigned char>(page.text[lead]);
    const std::size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    if (b >= 0xC0 && lead + need > page.text.size() && lead > 0) page.text.resize(lead);
  }
  return page;
}

expected<std::string> job_manager::logs(const std::string& id, const asker& who, std::uint64_t from) const {
  std::filesystem::path log;
  {
    std::lock_guard lock(mutex_);
    const auto* e = lookup(id, who);
    if (e == nullptr) return error(error_code::not_found, "no job " + id);
    log = folder(e->record.id) / "driver.log";
  }
  std::ifstream in(log, std::ios::binary);
  if (!in) return std::string();
  in.seekg(static_cast<std::streamoff>(from));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void job_manager::wait_for_change(const std::string& id, std::uint64_t log_bytes, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  const auto* e = lookup(id, asker{.admin = true, .job = {}});
  if (e == nullptr) return;
  const auto state = e->record.state;
  const auto log = folder(e->record.id) / "driver.log";
  // The log grows without telling anyone: look at it every 50 ms.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(log, ec);
    if (!ec && size > log_bytes) return;
    const auto* now = lookup(id, asker{.admin = true, .job = {}});
    if (now == nullptr || now->record.state != state) return;
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

expected<void> job_manager::put_package(const std::string& digest, std::string_view archive, const asker& who) {
  if (!who.admin) return error(error_code::permission_denied, "only the cluster's token uploads working directories");
  if (!is_package_digest(digest)) return error(error_code::invalid_argument, "a package name is its digest: 32 lowercase hex digits");
  if (package_digest(archive) != digest)
    return error(error_code::invalid_argument, "the package's bytes do not match its digest " + digest + " (a damaged upload?)");
  if (auto ok = inspect(archive); !ok) return error(error_code::invalid_argument, "not a working-directory package: " + ok.error().message());
  std::error_code ec;
  std::filesystem::create_directories(cfg_.packages_dir, ec);
  const auto path = cfg_.packages_dir / digest;
  const auto tmp = cfg_.packages_dir / (digest + ".part");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(archive.data(), static_cast<std::streamsize>(archive.size()));
    if (!out.flush())
      return error(error_code::resource_exhausted, "cannot store the working directory in " + cfg_.packages_dir.string() + " (disk full?)");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return error(error_code::unavailable, "cannot store the working directory: " + ec.message());
  return {};
}

bool job_manager::has_package(const std::string& digest) const {
  std::error_code ec;
  return is_package_digest(digest) && std::filesystem::is_regular_file(cfg_.packages_dir / digest, ec);
}

expected<std::string> job_manager::read_package(const job_id& job, const std::string& digest) const {
  {
    std::lock_guard lock(mutex_);
    auto it = jobs_.find(job);
    if (it == jobs_.end() || it->second.record.package.empty() || it->second.record.package != digest)
      return error(error_code::not_found, "job " + job.short_hex() + " was not submitted with working directory " + digest);
  }
  std::ifstream in(cfg_.packages_dir / digest, std::ios::binary);
  std::string archive((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return error(error_code::unavailable, "cannot read " + (cfg_.packages_dir / digest).string());
  if (archive.empty()) return error(error_code::not_found, "working directory " + digest + " is gone from " + cfg_.packages_dir.string());
  return archive;
}

void job_manager::tick() {
  std::vector<job_id> alive;
  {
    std::lock_guard lock(mutex_);
    const auto now = now_();
    for (auto& [id, e] : jobs_) {
      // A job waiting for its resources is alive too: the head keeps its placement group.
      if (e.record.status() == job_state::pending && !e.record.group.nil()) alive.push_back(id);
      if (e.record.status() != job_state::running) continue;
      alive.push_back(id);
      if (e.kill_at && now >= *e.kill_at) {
        CELER_LOG(warn, "jobs", "job " + e.record.submission_id + " did not stop within " +
                                  std::to_string(cfg_.stop_grace.count()) + " ms of SIGTERM: SIGKILL");
        launcher_.signal(e.record.pid, SIGKILL);
        e.kill_at.reset();
      }
    }
  }
  if (hooks_.alive)
    for (const auto& id : alive) hooks_.alive(id);
}

void job_manager::shutdown(std::chrono::milliseconds grace) {
  stop_waiters();
  std::unique_lock lock(mutex_);
  for (auto& [id, e] : jobs_) {
    if (e.record.status() != job_state::running) continue;
    e.record.stop_requested = true;
    launcher_.signal(e.record.pid, SIGTERM);
  }
  const auto running = [&] {
    return std::any_of(jobs_.begin(), jobs_.end(), [](const auto& kv) { return kv.second.record.status() == job_state::running; });
  };
  if (!changed_.wait_for(lock, grace, [&] { return !running(); })) {
    for (auto& [id, e] : jobs_)
      if (e.record.status() == job_state::running) launcher_.signal(e.record.pid, SIGKILL);
  }
  // exited() uses this object: wait for the last report.
  changed_.wait(lock, [&] { return !running(); });
}

std::map<job_state, std::size_t> job_manager::counts() const {
  std::lock_guard lock(mutex_);
  std::map<job_state, std::size_t> out;
  for (auto s : {job_state::pending, job_state::running, job_state::succeeded, job_state::failed, job_state::stopped}) out[s] = 0;
  for (const auto& [_, e] : jobs_) ++out[e.record.status()];
  return out;
}

} // namespace celer::jobs
