// The errors' definitions: code names, the typed exceptions, and the mapping of errors and
// failures onto the exceptions user code catches.
#include <celer/error.hpp>
#include <celer/detail/failure.hpp>

#include <string>

namespace celer {

std::string_view to_string(error_code code) noexcept {
  switch (code) {
    case error_code::ok: return "ok";
    case error_code::cancelled: return "cancelled";
    case error_code::invalid_argument: return "invalid_argument";
    case error_code::deadline_exceeded: return "deadline_exceeded";
    case error_code::not_found: return "not_found";
    case error_code::already_exists: return "already_exists";
    case error_code::permission_denied: return "permission_denied";
    case error_code::resource_exhausted: return "resource_exhausted";
    case error_code::failed_precondition: return "failed_precondition";
    case error_code::unavailable: return "unavailable";
    case error_code::data_loss: return "data_loss";
    case error_code::internal: return "internal";
    case error_code::unauthenticated: return "unauthenticated";
  }
  return "unknown";
}

std::string error::to_string() const { return std::string(celer::to_string(code_)) + ": " + message_; }

namespace {

/// "TYPE: MESSAGE", or either alone when the other is empty.
std::string typed_message(const std::string& type, const std::string& message) {
  if (type.empty()) return message;
  return message.empty() ? type : type + ": " + message;
}

} // namespace

task_error::task_error(std::string function, std::string node, std::string worker,
                       std::string message, std::string exception_type)
  : exception(error_code::internal, "task " + function + " failed on node " + node + ", worker " +
                                      worker + ": " + typed_message(exception_type, message)),
    function_(std::move(function)), node_(std::move(node)), worker_(std::move(worker)),
    remote_message_(std::move(message)), exception_type_(std::move(exception_type)) {}

void throw_error(const error& err) {
  switch (err.code()) {
    case error_code::deadline_exceeded: throw get_timeout_error(err.message());
    case error_code::data_loss: throw object_lost_error(err.message());
    default: throw exception(err.code(), err.message());
  }
}

namespace detail {

void throw_failure(const failure& f) {
  switch (f.kind) {
    case failure_kind::task_error:
      throw task_error(f.function, f.node, f.worker, f.message, f.exception_type);
    case failure_kind::actor_died: throw actor_died_error(f.message);
    case failure_kind::object_lost: throw object_lost_error(f.message, f.function, f.node);
    case failure_kind::infeasible: throw infeasible_error(f.message);
    case failure_kind::invalid_call: throw exception(f.code, f.message);
    case failure_kind::runtime_stopped: throw exception(error_code::cancelled, f.message);
    case failure_kind::worker_died: throw worker_died_error(f.message);
    case failure_kind::node_died: throw node_died_error(f.message);
    case failure_kind::actor_preempted: throw actor_preempted_error(f.message);
    case failure_kind::cancelled: throw task_cancelled_error(f.message);
  }
  throw exception(f.code, f.message);
}

error to_error(const failure& f) {
  if (f.kind == failure_kind::task_error) {
    return error(error_code::internal, "task " + f.function + " failed on node " + f.node + ": " +
                                         typed_message(f.exception_type, f.message));
  }
  return error(f.code, f.message);
}

} // namespace detail

} // namespace celer
