#pragma once
// Environment variables a task, an actor or a job asks for (Ray's runtime_env env_vars):
// what a name may be, which names are the runtime's own, and the one check the API (before
// anything is sent) and the node (before a worker process starts with them) both make.
//
//   if (auto why = protocol::env_vars_problem(options.env_vars); !why.empty()) throw ...;
//
// A worker process starts with its work's variables over the node's environment; a
// worker is reused only for work with the same ones (worker_pool).

#include <cstddef>
#include <map>
#include <string>

namespace celer::protocol {

using env_map = std::map<std::string, std::string>;

/// At most this many variables, and this many bytes of names and values together.
inline constexpr std::size_t max_env_vars = 256;
inline constexpr std::size_t max_env_bytes = 64 * 1024;

/// [A-Za-z_][A-Za-z0-9_]*, at most 128 characters.
[[nodiscard]] bool env_name_valid(const std::string& name);
/// The runtime sets these for a worker itself: CELER_* (but CELER_LOG_LEVEL),
/// CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER and TMPDIR.
[[nodiscard]] bool env_name_reserved(const std::string& name);
/// Why `env` cannot be given to a worker ("" when it can): a name that is not valid or is
/// reserved, a value holding a NUL byte, too many or too large.
[[nodiscard]] std::string env_vars_problem(const env_map& env);
/// `over` laid over `base`: a name in both takes `over`'s value.
[[nodiscard]] env_map merged_env(env_map base, const env_map& over);

} // namespace celer::protocol
