#pragma once
// Which shared namespaces each job is let into, and the namespaces whose detached actors run
// here as their namespace's job (credentials.hpp, namespace_job): the head's. Its transport
// asks it whose key a job's process may learn (zmq_transport, the 'K' lookup: a job meets
// only a namespace job it is let into, and a namespace job only the jobs let in there), and
// its actor directory who may make, find, call and kill a detached actor.
//
//   namespace_grants grants;
//   grants.grant(job, {"*"});          // a driver started with the token: every namespace
//   grants.grant(job, {"team"});       // a submitted job: the namespaces its submission names
//   grants.host("team");               // namespace_job("team") runs detached actors now
//   grants.may_meet(job, namespace_job("team"));   // true
//
// Any thread (the head's and its transport's receiver): one mutex guards it.
#include <celer/ids.hpp>

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace celer {

class namespace_grants {
public:
  /// The grant of every namespace.
  static constexpr std::string_view every = "*";
  /// Namespaces one job may be let into at most, and the longest name.
  static constexpr std::size_t max_namespaces = 64;
  static constexpr std::size_t max_name = 256;

  /// Job `job` is let into `namespaces` (replacing what it had; empty: none).
  void grant(const job_id& job, std::vector<std::string> namespaces);
  /// Detached actors of `name_space` run as its namespace job from now on.
  void host(const std::string& name_space);
  /// Job `job` ended: its grants go (and, for a namespace job, its namespace is no longer
  /// hosted).
  void forget(const job_id& job);

  [[nodiscard]] bool may_enter(const job_id& job, std::string_view name_space) const;
  /// Whether processes of `a` and `b` may connect to each other: one is a hosted
  /// namespace's job and the other is let into that namespace.
  [[nodiscard]] bool may_meet(const job_id& a, const job_id& b) const;
  /// The namespace `job` runs the detached actors of, if it is a hosted namespace's job.
  [[nodiscard]] std::optional<std::string> hosted(const job_id& job) const;

private:
  [[nodiscard]] bool may_enter_locked(const job_id& job, std::string_view name_space) const;

  mutable std::mutex mutex_;  // guards the two maps
  std::unordered_map<job_id, std::vector<std::string>> grants_;
  std::unordered_map<job_id, std::string> hosted_;
};

} // namespace celer
