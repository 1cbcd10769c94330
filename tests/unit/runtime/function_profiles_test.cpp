// What a core's task submitter learns of each function from its results
// (core/function_profiles.hpp): which functions' tasks may queue behind others on a worker.
#include "core/function_profiles.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace celer;
using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST_CASE("a function never heard of is not pipelined", "[core][function_profiles]") {
  const function_profiles functions;
  CHECK_FALSE(functions.pipelinable("f"));
  CHECK(functions.size() == 0);
}

TEST_CASE("a function is pipelined once a task of it came back quickly, alone on its worker",
          "[core][function_profiles]") {
  function_profiles functions;
  functions.came_back("f", /*blocked=*/false, /*ran_alone_for=*/microseconds(300));
  CHECK(functions.pipelinable("f"));
  CHECK_FALSE(functions.pipelinable("g"));  // learnt of f only

  // Exactly short_task is still short.
  functions.came_back("g", /*blocked=*/false, function_profiles::short_task);
  CHECK(functions.pipelinable("g"));
}

TEST_CASE("a slow task, or one that shared its worker, says nothing of its function's speed",
          "[core][function_profiles]") {
  function_profiles functions;
  functions.came_back("slow", /*blocked=*/false, function_profiles::short_task + microseconds(1));
  functions.came_back("shared", /*blocked=*/false, /*ran_alone_for=*/std::nullopt);
  CHECK_FALSE(functions.pipelinable("slow"));
  CHECK_FALSE(functions.pipelinable("shared"));
  CHECK(functions.size() == 2);  // heard of, all the same

  // A later quick one is enough.
  functions.came_back("slow", /*blocked=*/false, microseconds(10));
  CHECK(functions.pipelinable("slow"));
}

TEST_CASE("a function seen waiting in get is never pipelined again", "[core][function_profiles]") {
  function_profiles functions;
  functions.came_back("f", /*blocked=*/false, microseconds(10));
  REQUIRE(functions.pipelinable("f"));
  functions.came_back("f", /*blocked=*/true, microseconds(10));
  CHECK_FALSE(functions.pipelinable("f"));
  functions.came_back("f", /*blocked=*/false, microseconds(10));
  CHECK_FALSE(functions.pipelinable("f"));

  // Told by a worker that gave its tasks back, before any result.
  functions.saw_blocking("g");
  functions.came_back("g", /*blocked=*/false, milliseconds(1));
  CHECK_FALSE(functions.pipelinable("g"));
}
