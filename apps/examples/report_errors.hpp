#pragma once
// The examples' main: a celer error that nothing else caught ends the program with what
// went wrong and what to try, and exit code 1, instead of std::terminate's "terminate called
// after throwing an instance of 'celer::exception'". Copy it into a program of your own.
//
//   int main(int argc, char** argv) {
//     return report_errors([&] {
//       celer::init(argc, argv);
//       ...
//       celer::shutdown();
//       return 0;
//     });
//   }
#include <celer/celer.hpp>

#include <exception>
#include <iostream>

/// What to try after an error with `code` that reached main.
inline const char* hint_for(celer::error_code code) {
  switch (code) {
    case celer::error_code::unavailable:
      return "no cluster answers at the address given (--celer-address or CELER_ADDRESS): is its "
             "head running? `celer status` says; start one with `celer start --head`, or leave "
             "the address out to run embedded";
    case celer::error_code::unauthenticated:
      return "this machine has no token for that cluster, or a wrong one: on another machine "
             "than the head, set CELER_TOKEN (docs/cluster.md, \"Security\")";
    case celer::error_code::invalid_argument:
      return "check the program's arguments and its --celer-* flags (`celer --help-knobs` lists "
             "them)";
    default:
      return "docs/api.md, \"Errors\", says what each error means";
  }
}

/// Runs `body` (which returns main's exit code); a celer::exception or other std::exception
/// that escapes it is printed on standard error, the runtime is shut down, and 1 returned.
template <class Body>
int report_errors(Body&& body) {
  try {
    return body();
  } catch (const celer::exception& e) {
    std::cerr << "celer: " << celer::to_string(e.code()) << ": " << e.what() << "\n"
              << "hint: " << hint_for(e.code()) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  try {
    celer::shutdown();  // a no-op when init failed or never ran
  } catch (const std::exception&) {
    // Already reporting an error: this one would say less.
  }
  return 1;
}
