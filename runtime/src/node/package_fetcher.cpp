// A node's jobs' working directories (package_fetcher.hpp).
#include "node/package_fetcher.hpp"

#include "log.hpp"

#include <algorithm>

namespace celer {

package_fetcher::package_fetcher(transport& net, address head, node_id node, std::filesystem::path dir)
  : net_(net), head_(std::move(head)), node_(node) {
  if (!dir.empty()) cache_ = std::make_unique<jobs::package_cache>(std::move(dir));
}

bool package_fetcher::must_wait(const job_id& job, const std::string& digest) const {
  if (!cache_ || digest.empty()) return false;
  auto it = jobs_.find(digest);
  return it == jobs_.end() || !it->second.contains(job) || !cache_->ready(digest);
}

void package_fetcher::wait(const job_id& job, const std::string& digest, const worker_id& id) {
  auto& waiting = waits_[key(job, digest)];
  if (waiting.empty()) {
    const bool unpacked = cache_->ready(digest);
    CELER_LOG(info, "node",
              (unpacked ? "asking the head whether job " + job.short_hex() + " may use the working directory " + digest
                        : "fetching the working directory " + digest + " of job " + job.short_hex() + " from the head"));
    (void)net_.send(head_, protocol::package_fetch{digest, job, node_, unpacked});
  }
  waiting.push_back(id);
}

package_fetcher::answer package_fetcher::on(protocol::package_data& m) {
  answer a;
  auto waiting = waits_.extract(key(m.job, m.digest));
  if (waiting.empty() || !cache_) return a;
  a.workers = std::move(waiting.mapped());
  a.why = m.error;
  if (!a.why.empty()) {
    denials_.warn("permission_denied: job " + m.job.short_hex() + " named the working directory " + m.digest +
                  ", and the head refused it: " + a.why);
  } else if (m.archive.empty() && cache_->ready(m.digest)) {
    CELER_LOG(info, "node", "job " + m.job.short_hex() + " uses the working directory " + m.digest + " unpacked here");
  } else if (auto ok = cache_->install(m.digest, m.archive); !ok) {
    a.why = ok.error().message();
  } else {
    CELER_LOG(info, "node", "unpacked the working directory " + m.digest + " into " + cache_->path(m.digest).string());
  }
  if (a.why.empty()) jobs_[m.digest].insert(m.job);
  return a;
}

void package_fetcher::gave_up(const job_id& job, const std::string& digest, const worker_id& id) {
  auto waits = waits_.find(key(job, digest));
  if (waits == waits_.end()) return;
  std::erase(waits->second, id);
  if (waits->second.empty()) waits_.erase(waits);  // the next worker asks again
}

void package_fetcher::job_finished(const job_id& job) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it->second.erase(job);
    it = it->second.empty() ? jobs_.erase(it) : std::next(it);
  }
}

} // namespace celer
