#pragma once
/// What code knows about where, and as what, it runs; the cluster's nodes; and an actor
/// ending itself.
///
///   auto ctx = celer::get_runtime_context();        // in a task, an actor or the driver
///   std::cout << ctx.job.hex() << " attempt " << ctx.attempt << "\n";
///   auto dir = celer::getenv("DATA_DIR");          // the task's env_vars, else the process's
///   for (const auto& n : celer::nodes()) std::cout << n.id.short_hex() << " " << n.alive << "\n";
///   void quit() { celer::exit_actor(); }           // inside an actor's method

#include <celer/ids.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace celer {

/// Where and as what the calling code runs (celer::get_runtime_context). In the driver,
/// `task`, `actor` and `worker` are nil, `attempt` is 0 and `resources` and `gpu_ids` are
/// empty.
struct runtime_context {
  /// The job this code belongs to.
  job_id job;
  /// The task or actor call running this code (the creation task in an actor's factory).
  task_id task;
  /// The actor whose factory or method runs this code.
  actor_id actor;
  /// The node it runs on (a driver on a cluster: the node it submits to).
  node_id node;
  /// The worker it runs on.
  worker_id worker;
  /// What the running task, or the actor, was given ("CPU", "GPU", "memory", custom):
  /// what it asked for. An actor's methods see what the actor holds.
  std::map<std::string, double> resources;
  /// The GPUs it was given, as device indices on its node (celer::gpu_ids()).
  std::vector<int> gpu_ids;
  /// Which run of the task this is: 1 for its first, 2 for its first retry (max_retries,
  /// retry_exceptions); 0 in the driver.
  std::int32_t attempt = 0;
  /// Inside an actor: whether this instance was started again after it died
  /// (celer::was_restarted()).
  bool was_restarted = false;
  /// The namespace named actors are registered and found in: CELER_NAMESPACE when the job
  /// names one, else the job's id in hex (its own).
  std::string name_space;
  /// The environment variables celer gave the running task or actor (task_options and
  /// actor_options::env_vars over the job's and those it inherited); in the driver, the
  /// job's (init_options::env_vars, `celer submit --env`).
  std::map<std::string, std::string> env_vars;
};

/// Where and as what the calling code runs. Throws celer::exception (failed_precondition)
/// before `init`.
[[nodiscard]] runtime_context get_runtime_context();

/// The value of environment variable `name` as the calling code sees it: the env_vars
/// celer gave its task or actor (task_options::env_vars), else the process's environment;
/// nullopt when neither has it. On a cluster a worker process has them in its environment
/// (std::getenv sees them too); embedded, workers are threads of your program sharing its
/// environment, and only this call sees each task's own.
[[nodiscard]] std::optional<std::string> getenv(const std::string& name);

/// A node of the cluster, as the head sees it (celer::nodes()).
struct node_info {
  node_id id;
  /// Where its node agent listens ("tcp://host:port"); "embedded" for the node inside an
  /// embedded runtime.
  std::string address;
  /// What it offers in total ("CPU", "GPU", "memory", custom, and its "node:<id>").
  std::map<std::string, double> resources;
  /// Its labels (`celer start --labels zone=a,kind=spot`).
  std::map<std::string, std::string> labels;
  bool alive = true;
  /// Why the head declared it dead ("" while alive).
  std::string dead_reason;
};

/// Every node the head knows, live and dead, in the head's order. Throws
/// celer::exception (unavailable) when the head does not answer.
[[nodiscard]] std::vector<node_info> nodes();

/// Inside an actor's method: the actor ends itself once this call returns. The call's
/// result reaches its caller as usual; calls that have not started fail with
/// actor_died_error ("... exited: celer::exit_actor() was called in <method>"), and so does
/// every later call. The actor is not restarted, whatever its max_restarts, and its
/// resources return to its node. Throws celer::exception (invalid_argument) outside an
/// actor's method.
void exit_actor();

} // namespace celer
