// The runtime tests' main. The tests also run against a local cluster, whose node agents
// start this binary as worker processes: those serve tasks instead of running the tests.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <celer/celer.hpp>

int main(int argc, char** argv) {
  celer::serve_if_worker();
  return Catch::Session().run(argc, argv);
}
