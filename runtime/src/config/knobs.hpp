#pragma once
// The runtime's knobs, declared once in knobs.def.

#include <string>
#include <vector>

namespace celer {

struct knob_values {
#define CELER_KNOB(name, type, def, desc) type name = def;
#include "config/knobs.def"
#undef CELER_KNOB
};

struct knob_info {
  const char* name;
  const char* default_value;
  const char* description;
  /// Whether a --celer-<name> flag may set it: not for secrets (the token), which every
  /// user of the machine could read in /proc/PID/cmdline.
  bool command_line = true;
};

/// The knobs in force (defaults until load_knobs runs).
const knob_values& knobs();
/// Reads defaults, then CELER_* variables, then --celer-* flags of argv (which may be
/// null). Throws celer::exception(invalid_argument) for a value that does not parse, and
/// for a flag of a knob that is not taken from the command line (--celer-token).
knob_values load_knobs(int argc, char** argv);
/// Makes `values` the knobs in force.
void set_knobs(const knob_values& values);
/// Every knob with its default and description.
std::vector<knob_info> knob_list();

} // namespace celer
