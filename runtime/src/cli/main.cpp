// The `celer` command line. Subcommands (start, stop, status, submit, microbenchmark, ...)
// arrive with the issues that build them; today it reports its version and its knobs.
#include "config/knobs.hpp"

#include <celer/version.hpp>

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"celer: an actor-model distributed task runtime for machine-learning work"};
  app.set_version_flag("--version", std::string("celer ") + celer::version_string +
                                      " (protocol " + std::to_string(celer::protocol_version) +
                                      ")");
  bool knobs = false;
  app.add_flag("--help-knobs", knobs,
               "list every runtime knob: its CELER_* variable, --celer-* flag and default");
  app.footer(
    "Programs built with celer read --celer-<knob>=value flags and CELER_<KNOB> variables;\n"
    "see --help-knobs. Documentation: docs/ in the source tree.");
  CLI11_PARSE(app, argc, argv);
  if (knobs) {
    for (const auto& k : celer::knob_list()) {
      std::string upper, dashed;
      for (const char* c = k.name; *c; ++c) {
        upper += static_cast<char>(std::toupper(*c));
        dashed += *c == '_' ? '-' : *c;
      }
      std::cout << "CELER_" << upper << "  --celer-" << dashed << "  (default " << k.default_value
                << ")\n    " << k.description << "\n";
    }
    return 0;
  }
  if (argc == 1) {
    std::cout << app.help();
  }
  return 0;
}
