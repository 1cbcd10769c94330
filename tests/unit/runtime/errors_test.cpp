// Every error a user can meet: typed, understandable, and the runtime keeps working.
#include "unit/runtime/fixtures.hpp"
#include "unit/runtime/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <typeinfo>

#include <stdlib.h>

using namespace celer_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("an exception in remote code reaches get as task_error", "[errors]") {
  scoped_runtime rt;
  auto r = celer::task(fail_with).remote(std::string("disk on fire"));
  try {
    celer::get(r);
    FAIL("get did not throw");
  } catch (const celer::task_error& e) {
    REQUIRE(e.function() == "fail_with");
    REQUIRE(e.remote_message() == "disk on fire");
    REQUIRE(e.exception_type() == "std::runtime_error");
    REQUIRE_THAT(e.what(), Contains("fail_with") && Contains("std::runtime_error: disk on fire"));
    REQUIRE_FALSE(e.node().empty());
    REQUIRE_FALSE(e.worker().empty());
  }
  REQUIRE(celer::get(celer::task(add).remote(2, 2)) == 4);  // still working
}

namespace {

using celer_test::temp_dir;

namespace app {
/// An application's own exception type, in a namespace, as users write them.
struct parse_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
} // namespace app

int reject_argument(int x) { throw std::invalid_argument("x must be even, got " + std::to_string(x)); }
int fail_to_parse(std::string text) { throw app::parse_error("cannot parse '" + text + "'"); }
int throw_an_int() { throw 42; }
int fail_nested(int x) { return celer::get(celer::task(reject_argument).remote(x)); }

CELER_REMOTE(reject_argument, fail_to_parse, throw_an_int, fail_nested);

int runs_in(const std::filesystem::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

} // namespace

TEST_CASE("with retry_exceptions a task that threw runs again, and its result is stored once",
          "[errors][retry]") {
  scoped_runtime rt;
  temp_dir dir;
  auto r = celer::task(throw_first)
             .options({.max_retries = 3, .retry_exceptions = true})
             .remote(dir.path.string(), 2);
  REQUIRE(celer::get(r, 60s) == 3);
  REQUIRE(runs_in(dir.path) == 3);
}

TEST_CASE("without retry_exceptions an exception is not retried; with it, the last one says "
          "how every attempt failed",
          "[errors][retry]") {
  scoped_runtime rt;
  temp_dir once;
  REQUIRE_THROWS_AS(celer::get(celer::task(throw_first).remote(once.path.string(), 5), 60s),
                    celer::task_error);
  REQUIRE(runs_in(once.path) == 1);
  temp_dir twice;
  auto r = celer::task(throw_first)
             .options({.max_retries = 1, .retry_exceptions = true})
             .remote(twice.path.string(), 5);
  try {
    celer::get(r, 60s);
    FAIL("the task returned");
  } catch (const celer::task_error& e) {
    REQUIRE_THAT(e.what(), Contains("throw_first failed after 2 attempts: attempt 1: it threw std::runtime_error: run "
                                    "1 failed; attempt 2: it threw std::runtime_error: run 2 failed"));
  }
  REQUIRE(runs_in(twice.path) == 2);
}

TEST_CASE("retry_exceptions with a list of types retries those types only, by their exact name",
          "[errors][retry]") {
  scoped_runtime rt;
  CHECK(celer::type_name_of(typeid(std::runtime_error)) == "std::runtime_error");
  temp_dir other;
  auto not_listed = celer::task(throw_first)
                      .options({.max_retries = 3, .retry_exceptions = {"std::logic_error"}})
                      .remote(other.path.string(), 2);
  REQUIRE_THROWS_AS(celer::get(not_listed, 60s), celer::task_error);
  CHECK(runs_in(other.path) == 1);
  temp_dir listed;
  auto r = celer::task(throw_first)
             .options({.max_retries = 3,
                       .retry_exceptions = celer::retry_on<std::logic_error, std::runtime_error>()})
             .remote(listed.path.string(), 2);
  CHECK(celer::get(r, 60s) == 3);
  CHECK(runs_in(listed.path) == 3);
}

TEST_CASE("max_retries below -1 is refused", "[errors][retry]") {
  scoped_runtime rt;
  try {
    (void)celer::task(add).options({.max_retries = -2}).remote(1, 2);
    FAIL("max_retries -2 was accepted");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::invalid_argument);
    REQUIRE_THAT(e.what(), Contains("max_retries"));
  }
}

TEST_CASE("a failed argument makes the dependent task fail with the original error", "[errors]") {
  scoped_runtime rt;
  auto bad = celer::task(fail_with).remote(std::string("upstream"));
  auto dependent = celer::task(twice).remote(bad);
  REQUIRE_THROWS_AS(celer::get(dependent), celer::task_error);
  try {
    celer::get(dependent);
  } catch (const celer::task_error& e) {
    REQUIRE(e.function() == "fail_with");
  }
}

TEST_CASE("calling a function that is not registered throws not_found", "[errors]") {
  scoped_runtime rt;
  auto unregistered = +[](int x) { return x; };
  try {
    celer::task(unregistered).remote(1);
    FAIL("no error");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::not_found);
    REQUIRE_THAT(e.what(), Contains("CELER_REMOTE"));
  }
}

TEST_CASE("a worker that does not know the function name fails the task clearly", "[errors]") {
  scoped_runtime rt;
  celer::detail::remote_entry fake = *celer::detail::find_remote("add");
  fake.name = "no_such_function";
  auto r = celer::detail::submit_task(fake, {}, {});
  try {
    celer::detail::decode_result<int>(celer::detail::fetch({r}, std::nullopt).front());
    FAIL("no error");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::not_found);
    REQUIRE_THAT(e.what(), Contains("no_such_function") && Contains("not registered"));
  }
}

TEST_CASE("arguments that do not match the registered signature fail clearly", "[errors]") {
  scoped_runtime rt;
  const auto& entry = *celer::detail::find_remote("add");
  SECTION("too few arguments") {
    std::vector<celer::detail::arg_spec> args(1);
    args[0].value = celer::detail::pack(1);
    auto r = celer::detail::restore<int>(celer::detail::submit_task(entry, args, {}));
    try {
      celer::get(r);
      FAIL("no error");
    } catch (const celer::exception& e) {
      REQUIRE(e.code() == celer::error_code::invalid_argument);
      REQUIRE_THAT(e.what(), Contains("add takes 2 argument(s), 1 given"));
    }
  }
  SECTION("an argument of the wrong type") {
    std::vector<celer::detail::arg_spec> args(2);
    args[0].value = celer::detail::pack(std::string("one"));
    args[1].value = celer::detail::pack(2);
    auto r = celer::detail::restore<int>(celer::detail::submit_task(entry, args, {}));
    try {
      celer::get(r);
      FAIL("no error");
    } catch (const celer::exception& e) {
      REQUIRE(e.code() == celer::error_code::invalid_argument);
      REQUIRE_THAT(e.what(), Contains("argument 1 of add"));
    }
  }
  REQUIRE(celer::get(celer::task(add).remote(1, 1)) == 2);
}

TEST_CASE("get past its timeout throws get_timeout_error and the object still arrives",
          "[errors][embedded]") {
  scoped_runtime rt;
  closed_gate gate;
  auto r = celer::task(hold_until_released).remote(3);
  REQUIRE_THROWS_AS(celer::get(r, 50ms), celer::get_timeout_error);
  release_gate = true;
  REQUIRE(celer::get(r) == 3);
}

TEST_CASE("a task needing more CPUs than any node has fails at once as infeasible",
          "[errors][resources]") {
  scoped_runtime rt;
  auto r = celer::task(add).options({.num_cpus = 64}).remote(1, 2);
  try {
    celer::get(r, 30s);
    FAIL("no error");
  } catch (const celer::infeasible_error& e) {
    REQUIRE_THAT(e.what(), Contains("CPU") && Contains("add"));
  }
  auto g = celer::task(add).options({.num_gpus = 1}).remote(1, 2);
  REQUIRE_THROWS_AS(celer::get(g, 30s), celer::infeasible_error);
  auto custom = celer::task(add).options({.resources = {{"tpu", 1}}}).remote(1, 2);
  REQUIRE_THROWS_AS(celer::get(custom, 30s), celer::infeasible_error);
}

TEST_CASE("an actor needing more than any node has fails at creation", "[errors][resources]") {
  scoped_runtime rt;
  REQUIRE_THROWS_AS(celer::actor(make_counter).options({.num_cpus = 64}).remote(0),
                    celer::infeasible_error);
}

TEST_CASE("invalid resource requests are rejected at submission", "[errors][resources]") {
  scoped_runtime rt;
  REQUIRE_THROWS_AS(celer::task(add).options({.num_cpus = -1}).remote(1, 2), celer::exception);
  REQUIRE_THROWS_AS(celer::task(add).options({.num_gpus = 1.5}).remote(1, 2), celer::exception);
  REQUIRE_THROWS_AS(celer::actor(make_counter).options({.max_concurrency = 0}).remote(0),
                    celer::exception);
}

TEST_CASE("an actor whose constructor throws fails its calls with the reason", "[errors][actor]") {
  scoped_runtime rt;
  auto b = celer::actor(make_broken).remote();
  try {
    celer::get(b.task(&broken::f).remote(), 30s);
    FAIL("no error");
  } catch (const celer::actor_died_error& e) {
    REQUIRE_THAT(e.what(), Contains("constructor exploded"));
  }
}

TEST_CASE("a second actor with a taken name is refused", "[errors][actor]") {
  scoped_runtime rt;
  auto a = celer::actor(make_counter).options({.name = "unique"}).remote(0);
  try {
    celer::actor(make_counter).options({.name = "unique"}).remote(0);
    FAIL("no error");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::already_exists);
  }
  REQUIRE(celer::get(a.task(&counter::incr).remote(1)) == 1);
}

TEST_CASE("get_actor reports a missing name and a wrong type", "[errors][actor]") {
  scoped_runtime rt;
  REQUIRE_THROWS_AS(celer::get_actor<counter>("nobody"), celer::exception);
  celer::actor(make_counter).options({.name = "typed"}).remote(0);
  try {
    celer::get_actor<rendezvous>("typed");
    FAIL("no error");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::invalid_argument);
  }
}

TEST_CASE("get of a ref this process never made is object_lost", "[errors]") {
  scoped_runtime rt;
  auto made = celer::put(1);
  celer::object_ref<int> forged(celer::object_id::random(), made.owner());
  REQUIRE_THROWS_AS(celer::get(forged), celer::object_lost_error);
}

TEST_CASE("a task error names the exception's type, demangled, as Ray does", "[errors]") {
  scoped_runtime rt;
  try {
    celer::get(celer::task(reject_argument).remote(3));
    FAIL("get did not throw");
  } catch (const celer::task_error& e) {
    CHECK(e.exception_type() == "std::invalid_argument");
    CHECK(e.remote_message() == "x must be even, got 3");
    CHECK(e.code() == celer::error_code::internal);
    CHECK_THAT(e.what(), Contains("task reject_argument failed on node ") &&
                           Contains(": std::invalid_argument: x must be even, got 3"));
  }
  try {
    celer::get(celer::task(fail_to_parse).remote(std::string("{oops")));
    FAIL("get did not throw");
  } catch (const celer::task_error& e) {
    CHECK_THAT(e.exception_type(), Contains("app::parse_error"));
    CHECK_THAT(e.what(), Contains("app::parse_error: cannot parse '{oops'"));
  }
  // try_get's error says the same.
  auto failed = celer::try_get(celer::task(reject_argument).remote(5));
  REQUIRE_FALSE(failed.has_value());
  CHECK_THAT(failed.error().message(), Contains("std::invalid_argument: x must be even, got 5"));
}

TEST_CASE("a thrown value that is not a std::exception is named by its type", "[errors]") {
  scoped_runtime rt;
  try {
    celer::get(celer::task(throw_an_int).remote());
    FAIL("get did not throw");
  } catch (const celer::task_error& e) {
    CHECK(e.exception_type() == "int");
    CHECK_THAT(e.what(), Contains("throw_an_int") && Contains("int: not a std::exception"));
  }
}

TEST_CASE("a task error from a nested task names both failures and their types", "[errors]") {
  scoped_runtime rt;
  try {
    celer::get(celer::task(fail_nested).remote(7));
    FAIL("get did not throw");
  } catch (const celer::task_error& e) {
    CHECK(e.function() == "fail_nested");
    CHECK(e.exception_type() == "celer::task_error");
    CHECK_THAT(e.remote_message(), Contains("task reject_argument failed") &&
                                     Contains("std::invalid_argument: x must be even, got 7"));
  }
}

TEST_CASE("custom resource amounts of zero or less are refused, naming the resource",
          "[errors][resources]") {
  scoped_runtime rt;
  auto refused = [](auto&& submit, const std::string& what) {
    try {
      submit();
      FAIL(what + " was accepted");
    } catch (const celer::exception& e) {
      CHECK(e.code() == celer::error_code::invalid_argument);
      CHECK_THAT(e.what(), Contains("custom resource 'ssd' must be positive"));
    }
  };
  refused([] { (void)celer::task(add).options({.resources = {{"ssd", 0}}}).remote(1, 2); },
          "a task asking for 0 ssd");
  refused([] { (void)celer::task(add).options({.resources = {{"ssd", -1}}}).remote(1, 2); },
          "a task asking for -1 ssd");
  refused([] { (void)celer::actor(make_counter).options({.resources = {{"ssd", 0}}}).remote(0); },
          "an actor asking for 0 ssd");
  refused(
    [] {
      (void)celer::create_placement_group({.bundles = {{.num_cpus = 1, .resources = {{"ssd", 0}}}}});
    },
    "a bundle reserving 0 ssd");
  // Zero CPUs and GPUs stay what they always were: asking for none.
  CHECK(celer::get(celer::task(add).options({.num_cpus = 0.5, .num_gpus = 0}).remote(1, 2)) == 3);
}

TEST_CASE("a second live placement group with a taken name is refused", "[errors][groups]") {
  scoped_runtime rt;
  auto first = celer::create_placement_group({.bundles = {{.num_cpus = 1}}, .name = "trainers"});
  try {
    (void)celer::create_placement_group({.bundles = {{.num_cpus = 1}}, .name = "trainers"});
    FAIL("two groups named trainers");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::already_exists);
    CHECK_THAT(e.what(), Contains("placement group named 'trainers' already exists") &&
                           Contains(first.id().short_hex()));
  }
  // Other names, and groups without one, are fine; a removed group's name is free again.
  auto other = celer::create_placement_group({.bundles = {{.num_cpus = 1}}, .name = "readers"});
  auto unnamed1 = celer::create_placement_group({.bundles = {{.num_cpus = 1}}});
  auto unnamed2 = celer::create_placement_group({.bundles = {{.num_cpus = 1}}});
  celer::remove_placement_group(first);
  auto again = celer::create_placement_group({.bundles = {{.num_cpus = 1}}, .name = "trainers"});
  int named_trainers = 0;
  for (const auto& g : celer::list_placement_groups()) {
    if (g.name == "trainers" && g.state != "removed") {
      ++named_trainers;
      CHECK(g.id == again.id());
    }
  }
  CHECK(named_trainers == 1);
  for (const auto& g : {other, unnamed1, unnamed2, again}) celer::remove_placement_group(g);
}
