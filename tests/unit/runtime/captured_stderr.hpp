#pragma once
// What the log writes to std::cerr while a test's code runs.
#include <iostream>
#include <sstream>
#include <string>

namespace celer_test {

template <class F>
std::string captured_stderr(F f) {
  std::ostringstream out;
  auto* old = std::cerr.rdbuf(out.rdbuf());
  f();
  std::cerr.rdbuf(old);
  return out.str();
}

} // namespace celer_test
