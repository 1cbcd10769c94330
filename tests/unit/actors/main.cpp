// The built-in actors' tests' main. Tests that start a local cluster have its node agents
// start this binary as worker processes: those serve tasks instead of running the tests.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <celer/celer.hpp>

int main(int argc, char** argv) {
  celer::serve_if_worker();
  return Catch::Session().run(argc, argv);
}
