#pragma once
/// Failures: why an object holds an error instead of a value. The kind travels with a task's
/// result (on the wire too) and picks the exception `celer::get` throws for it.
///
///   detail::failure f{.kind = detail::failure_kind::actor_died,
///                     .code = error_code::unavailable, .message = "actor a1b2c3d4 died"};
///   detail::throw_failure(f);                       // throws celer::actor_died_error
///   celer::error e = detail::to_error(f);           // or the same as a value
///
/// Vocabulary of the runtime's internals rather than of user code, hence `detail`; it lives in
/// celer::base with the errors it maps onto.

#include <celer/error.hpp>

#include <string>

namespace celer::detail {

/// Why an object holds an error instead of a value.
enum class failure_kind : unsigned char {
  task_error,       ///< remote code threw
  actor_died,       ///< the actor is dead
  object_lost,      ///< the object is gone
  infeasible,       ///< no node can ever satisfy the request
  invalid_call,     ///< unknown function or mismatched arguments
  runtime_stopped,  ///< the runtime shut down before the object was made
  worker_died,      ///< the worker process running the task died
  node_died,        ///< the node running the task died
  actor_preempted,  ///< the actor was preempted for higher-priority work
  cancelled,        ///< celer::cancel stopped the task or call before it finished
};

/// A failure as it is reported: its kind, its code, and where it happened (for task errors).
struct failure {
  failure_kind kind = failure_kind::task_error;
  error_code code = error_code::internal;
  std::string message;
  std::string function, node, worker;
  /// For task errors: the type of the exception remote code threw, demangled.
  std::string exception_type;
};

/// Throws the exception user code catches for `f` (task_error, actor_died_error, ...).
[[noreturn]] void throw_failure(const failure& f);
/// The same failure as an error value, for `celer::try_get`.
celer::error to_error(const failure& f);

} // namespace celer::detail
