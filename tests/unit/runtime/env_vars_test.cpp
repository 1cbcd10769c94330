// Environment variables per task, per actor and per job (Ray's runtime_env env_vars):
// task_options, actor_options and init_options::env_vars, inherited by nested work,
// celer::getenv, and what is refused. Embedded and (the suite's pass against a local cluster)
// on a cluster, where each worker process also has them in its environment.
#include "protocol/env_vars.hpp"
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

using namespace celer_test;
using Catch::Matchers::Contains;

namespace {

/// The variable as the task sees it through celer::getenv, or "unset".
std::string env_of(std::string name) { return celer::getenv(name).value_or("unset"); }
/// The variable in the worker process's own environment, or "unset".
std::string process_env_of(std::string name) {
  const char* v = std::getenv(name.c_str());
  return v != nullptr ? v : "unset";
}
/// What a child that inherits sees, and what a child that sets its own sees: "a/b".
std::string nested_env(std::string name) {
  auto inherited = celer::get(celer::task(env_of).remote(name));
  auto own = celer::get(celer::task(env_of).options({.env_vars = {{name, "child"}}}).remote(name));
  return inherited + "/" + own;
}

struct env_reader {
  std::string at_start;
  std::string started() { return at_start; }
  std::string read(std::string name) { return env_of(name); }
  std::string read_in_process(std::string name) { return process_env_of(name); }
};
env_reader* make_env_reader(std::string name) { return new env_reader{env_of(name)}; }

CELER_REMOTE(env_of, process_env_of, nested_env, make_env_reader, &env_reader::started, &env_reader::read,
             &env_reader::read_in_process);

bool on_a_cluster() { return std::getenv("CELER_ADDRESS") != nullptr; }

} // namespace

TEST_CASE("env_vars: which names and values a worker can be given", "[env_vars]") {
  using celer::protocol::env_vars_problem;
  CHECK(env_vars_problem({}).empty());
  CHECK(env_vars_problem({{"OMP_NUM_THREADS", "4"}, {"_x1", ""}, {"CELER_LOG_LEVEL", "debug"}}).empty());
  CHECK_THAT(env_vars_problem({{"1ABC", "x"}}), Contains("'1ABC' is not [A-Za-z_][A-Za-z0-9_]*"));
  CHECK_THAT(env_vars_problem({{"A=B", "x"}}), Contains("is not"));
  CHECK_THAT(env_vars_problem({{"", "x"}}), Contains("is not"));
  CHECK_THAT(env_vars_problem({{"CELER_JOB_CREDENTIAL", "x"}}), Contains("CELER_JOB_CREDENTIAL is the runtime's"));
  CHECK_THAT(env_vars_problem({{"CUDA_VISIBLE_DEVICES", "0"}}), Contains("the runtime's"));
  CHECK_THAT(env_vars_problem({{"A", std::string("x\0y", 3)}}), Contains("NUL"));
  celer::protocol::env_map many;
  for (int i = 0; i < 300; ++i) many["V" + std::to_string(i)] = "1";
  CHECK_THAT(env_vars_problem(many), Contains("300 environment variables, more than 256"));
  CHECK_THAT(env_vars_problem({{"BIG", std::string(70000, 'x')}}), Contains("more than 65536"));
  CHECK(celer::protocol::merged_env({{"A", "1"}, {"B", "2"}}, {{"B", "3"}, {"C", "4"}}) ==
        celer::protocol::env_map{{"A", "1"}, {"B", "3"}, {"C", "4"}});
}

TEST_CASE("a task's, an actor's and the job's env_vars reach their code, and nested work inherits them",
          "[api][env_vars]") {
  scoped_runtime rt({.num_cpus = 2, .env_vars = {{"CELERTEST_JOB", "job"}, {"CELERTEST_MODE", "job-mode"}}});
  CHECK(celer::get_runtime_context().env_vars.at("CELERTEST_JOB") == "job");

  // The job's, under a task's own.
  CHECK(celer::get(celer::task(env_of).remote(std::string("CELERTEST_MODE"))) == "job-mode");
  auto fast = celer::task_options{.env_vars = {{"CELERTEST_MODE", "fast"}}};
  CHECK(celer::get(celer::task(env_of).options(fast).remote(std::string("CELERTEST_MODE"))) == "fast");
  CHECK(celer::get(celer::task(env_of).options(fast).remote(std::string("CELERTEST_JOB"))) == "job");
  // A worker started with them is not reused for work without them.
  CHECK(celer::get(celer::task(env_of).remote(std::string("CELERTEST_MODE"))) == "job-mode");
  CHECK(celer::get(celer::task(env_of).remote(std::string("CELERTEST_NONE"))) == "unset");

  // Nested work inherits its parent's, and may set its own.
  auto parent = celer::task_options{.env_vars = {{"CELERTEST_NEST", "parent"}}};
  CHECK(celer::get(celer::task(nested_env).options(parent).remote(std::string("CELERTEST_NEST"))) ==
        "parent/child");

  // An actor's: its factory and every method.
  auto a = celer::actor(make_env_reader)
             .options({.env_vars = {{"CELERTEST_MODE", "actor"}}})
             .remote(std::string("CELERTEST_MODE"));
  CHECK(celer::get(a.task(&env_reader::started).remote()) == "actor");
  CHECK(celer::get(a.task(&env_reader::read).remote(std::string("CELERTEST_MODE"))) == "actor");
  CHECK(celer::get(a.task(&env_reader::read).remote(std::string("CELERTEST_JOB"))) == "job");

  if (on_a_cluster()) {
    // A worker process has them in its own environment too.
    CHECK(celer::get(celer::task(process_env_of).options(fast).remote(std::string("CELERTEST_MODE"))) == "fast");
    CHECK(celer::get(celer::task(process_env_of).remote(std::string("CELERTEST_MODE"))) == "job-mode");
    CHECK(celer::get(a.task(&env_reader::read_in_process).remote(std::string("CELERTEST_MODE"))) == "actor");
  }
}

TEST_CASE("env_vars the runtime keeps, or that no process can have, are refused before anything runs",
          "[api][env_vars]") {
  {
    scoped_runtime rt;
    try {
      (void)celer::task(env_of).options({.env_vars = {{"CELER_JOB_CREDENTIAL", "stolen"}}}).remote(std::string("X"));
      FAIL("a task naming CELER_JOB_CREDENTIAL was accepted");
    } catch (const celer::exception& e) {
      CHECK(e.code() == celer::error_code::invalid_argument);
      CHECK_THAT(e.what(), Contains("env_of") && Contains("CELER_JOB_CREDENTIAL is the runtime's to set"));
    }
    try {
      (void)celer::actor(make_env_reader).options({.env_vars = {{"bad name", "1"}}}).remote(std::string("X"));
      FAIL("an actor with a bad variable name was accepted");
    } catch (const celer::exception& e) {
      CHECK(e.code() == celer::error_code::invalid_argument);
      CHECK_THAT(e.what(), Contains("'bad name' is not"));
    }
    CHECK(celer::get(celer::task(env_of).remote(std::string("CELERTEST_NONE"))) == "unset");
  }
  try {
    celer::init({.env_vars = {{"TMPDIR", "/elsewhere"}}});
    celer::shutdown();
    FAIL("init with TMPDIR in env_vars was accepted");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::invalid_argument);
    CHECK_THAT(e.what(), Contains("init_options::env_vars: environment variable TMPDIR"));
  }
}

TEST_CASE("a submitted job's variables (CELER_ENV_VARS names them) reach its workers",
          "[api][env_vars][cluster-only]") {
  // The job manager starts a submitted driver with `celer submit --env` variables in its
  // environment and their names in CELER_ENV_VARS; this driver plays that part.
  ::setenv("CELERTEST_SUBMITTED", "from-submit", 1);
  ::setenv("CELER_ENV_VARS", "CELERTEST_SUBMITTED,CELER_JOB_CREDENTIAL", 1);
  struct unset_at_end {
    ~unset_at_end() {
      ::unsetenv("CELERTEST_SUBMITTED");
      ::unsetenv("CELER_ENV_VARS");
    }
  } unset;
  scoped_runtime rt;
  CHECK(celer::get_runtime_context().env_vars.count("CELER_JOB_CREDENTIAL") == 0);
  CHECK(celer::get(celer::task(process_env_of).remote(std::string("CELERTEST_SUBMITTED"))) == "from-submit");
}
