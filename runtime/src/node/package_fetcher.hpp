#pragma once
// A node's jobs' working directories (task_spec::package, docs/jobs.md "Working
// directories"): unpacked once per digest under the node's packages_dir, fetched from the
// head (package_fetch, answered by package_data) before the first worker of a job that uses
// one starts here. A job's workers start in a copy only once the head said the job was
// submitted with it: a job cannot start in another job's copy by naming its digest.
//
//   package_fetcher packages(net, head, node, dir);
//   if (packages.must_wait(job, digest)) packages.wait(job, digest, worker)  // asks the head once
//   auto done = packages.on(package_data)     // the workers that may start now, or why not
//   packages.gave_up(job, digest, worker)     // it timed out or went
//   packages.job_finished(job)
//
// One of the node agent's pieces: it owns the cache, the waits and the bindings; the agent
// starts or fails the workers it names. Threads: the agent's (one message at a time).

#include "jobs/package.hpp"
#include "protocol/messages.hpp"
#include "transport/rate_limited_log.hpp"
#include "transport/transport.hpp"

#include <filesystem>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace celer {

class package_fetcher {
public:
  /// `dir`: where packages are unpacked (empty: none; work naming a package starts
  /// without it, as before packages existed).
  package_fetcher(transport& net, address head, node_id node, std::filesystem::path dir);

  /// Whether a worker of `job` for `digest` must wait for the head before it starts.
  [[nodiscard]] bool must_wait(const job_id& job, const std::string& digest) const;
  /// Worker `id` waits for `digest` for `job`; the head is asked when it is the first.
  void wait(const job_id& job, const std::string& digest, const worker_id& id);
  /// The head's answer: the workers that waited for it, and why they cannot start (empty:
  /// they may; the package is unpacked and bound to the job).
  struct answer {
    std::vector<worker_id> workers;
    std::string why;
  };
  answer on(protocol::package_data& m);
  /// Worker `id` no longer waits (it timed out, or went); the next worker asks again.
  void gave_up(const job_id& job, const std::string& digest, const worker_id& id);
  /// The job's bindings go.
  void job_finished(const job_id& job);

private:
  [[nodiscard]] static std::string key(const job_id& job, const std::string& digest) {
    return digest + "/" + job.hex();
  }

  transport& net_;
  address head_;
  node_id node_;
  /// Null when the node has no packages_dir.
  std::unique_ptr<jobs::package_cache> cache_;
  /// The workers waiting for each (digest, job) being fetched from the head.
  std::unordered_map<std::string, std::vector<worker_id>> waits_;
  /// The jobs the head said may use each unpacked package (package_data::job).
  std::unordered_map<std::string, std::unordered_set<job_id>> jobs_;
  rate_limited_log denials_{"node"};
};

} // namespace celer
