#include "config/knobs.hpp"

#include <celer/error.hpp>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

namespace celer {
namespace {

std::mutex knobs_mutex;
knob_values current;

void parse(const std::string& name, const std::string& text, std::string& out) { out = text; }
void parse(const std::string& name, const std::string& text, double& out) {
  std::size_t used = 0;
  try {
    out = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw exception(error_code::invalid_argument,
                    "knob " + name + ": '" + text + "' is not a number");
  }
}
void parse(const std::string& name, const std::string& text, int& out) {
  double d = 0;
  parse(name, text, d);
  if (d != static_cast<int>(d)) {
    throw exception(error_code::invalid_argument,
                    "knob " + name + ": '" + text + "' is not a whole number");
  }
  out = static_cast<int>(d);
}

std::string env_name(const char* knob) {
  std::string out = "CELER_";
  for (const char* c = knob; *c; ++c) out += static_cast<char>(std::toupper(*c));
  return out;
}

std::string flag_name(const char* knob) {
  std::string out = "--celer-";
  for (const char* c = knob; *c; ++c) out += *c == '_' ? '-' : *c;
  return out;
}

/// Knobs that hold secrets: read from the environment only, never from argv, which every
/// user of the machine can read (ps, /proc/PID/cmdline).
bool from_command_line(std::string_view knob) { return knob != "token"; }

[[noreturn]] void refuse_secret_flag(const std::string& flag, const char* knob) {
  throw exception(error_code::invalid_argument,
                  flag + " is not accepted: the " + knob + " knob is a secret, and a command "
                  "line can be read by every user of the machine (ps, /proc/PID/cmdline); set " +
                  env_name(knob) + " in the environment instead");
}

} // namespace

const knob_values& knobs() { return current; }

void set_knobs(const knob_values& values) {
  std::lock_guard lock(knobs_mutex);
  current = values;
}

knob_values load_knobs(int argc, char** argv) {
  knob_values v;
#define CELER_KNOB(name, type, def, desc)                                      \
  if (const char* e = std::getenv(env_name(#name).c_str()); e && *e) {         \
    parse(#name, e, v.name);                                                   \
  }                                                                            \
  for (int i = 1; argv != nullptr && i < argc; ++i) {                          \
    std::string arg = argv[i];                                                 \
    const std::string flag = flag_name(#name);                                 \
    if (arg.rfind(flag + "=", 0) == 0) {                                       \
      if (!from_command_line(#name)) refuse_secret_flag(flag, #name);          \
      parse(#name, arg.substr(flag.size() + 1), v.name);                       \
    } else if (arg == flag) {                                                  \
      if (!from_command_line(#name)) refuse_secret_flag(flag, #name);          \
      if (i + 1 < argc) parse(#name, argv[i + 1], v.name);                     \
    }                                                                          \
  }
#include "config/knobs.def"
#undef CELER_KNOB
  return v;
}

std::vector<knob_info> knob_list() {
  return {
#define CELER_KNOB(name, type, def, desc) knob_info{#name, #def, desc, from_command_line(#name)},
#include "config/knobs.def"
#undef CELER_KNOB
  };
}

} // namespace celer
