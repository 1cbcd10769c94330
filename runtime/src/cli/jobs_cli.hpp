#pragma once
// `celer submit` and `celer job list|status|logs|stop|delete` (docs/jobs.md): clients of the
// head's jobs API over HTTP, with the cluster's token from this machine's session (or
// CELER_TOKEN), or inside a submitted job its own credential.

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace celer::cli {

/// Adds the commands to `app`; the function returned runs the one parsed (nullopt-like:
/// returns -1 when none of them was given).
std::function<int()> add_job_commands(CLI::App& app);

/// `celer job list` (also `celer list jobs`).
int list_jobs(const std::string& address);

/// `celer list tasks`'s filters: a job (its id, or the first 8 digits), a state, how many.
struct task_filter {
  std::string job;
  std::string state;
  int limit = 20;
};

/// `celer list nodes|actors|tasks|objects` (state_cli.cpp).
int list_state(const std::string& what, const std::string& address, const task_filter& tasks = {});

/// `celer actor kill ID|NAME [--no-restart false]` (state_cli.cpp): the live actor of that
/// id (or its first 8 digits or more) or name, stopped through the head's HTTP API.
int kill_actor(const std::string& which, bool no_restart, const std::string& address);

} // namespace celer::cli
