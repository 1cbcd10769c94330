#include "protocol/env_vars.hpp"

namespace celer::protocol {

bool env_name_valid(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!letter(name.front())) return false;
  for (char c : name) {
    if (!letter(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool env_name_reserved(const std::string& name) {
  if (name.starts_with("CELER_")) return name != "CELER_LOG_LEVEL";
  return name == "CUDA_VISIBLE_DEVICES" || name == "CUDA_DEVICE_ORDER" || name == "TMPDIR";
}

std::string env_vars_problem(const env_map& env) {
  if (env.size() > max_env_vars) {
    return std::to_string(env.size()) + " environment variables, more than " + std::to_string(max_env_vars);
  }
  std::size_t bytes = 0;
  for (const auto& [name, value] : env) {
    if (!env_name_valid(name)) return "environment variable name '" + name + "' is not [A-Za-z_][A-Za-z0-9_]*";
    if (env_name_reserved(name)) {
      return "environment variable " + name + " is the runtime's to set for a worker (CELER_*, "
             "CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, TMPDIR)";
    }
    if (value.find('\0') != std::string::npos) return "environment variable " + name + "'s value holds a NUL byte";
    bytes += name.size() + value.size() + 2;
  }
  if (bytes > max_env_bytes) {
    return "environment variables of " + std::to_string(bytes) + " bytes, more than " + std::to_string(max_env_bytes);
  }
  return {};
}

env_map merged_env(env_map base, const env_map& over) {
  for (const auto& [name, value] : over) base[name] = value;
  return base;
}

} // namespace celer::protocol
