#pragma once
// Why an object or a request failed, as every message that reports a failure carries it.
// Part of the wire: changing a field changes celer::protocol_version.

#include "protocol/decode_budget.hpp"

#include <celer/codec.hpp>
#include <celer/error.hpp>
#include <celer/detail/failure.hpp>

#include <string>
#include <utility>

MSGPACK_ADD_ENUM(celer::detail::failure_kind);
MSGPACK_ADD_ENUM(celer::error_code);

namespace celer::protocol {

/// Why an object or a request failed; mirrors detail::failure.
struct failure_info {
  detail::failure_kind kind = detail::failure_kind::task_error;
  error_code code = error_code::internal;
  std::string message;
  std::string function;
  std::string node;
  std::string worker;
  /// The type of the exception remote code threw, demangled (protocol 20); empty otherwise.
  std::string exception_type;
  CELER_MSGPACK_DEFINE(kind, code, message, function, node, worker, exception_type)

  [[nodiscard]] detail::failure to_failure() const {
    return {kind, code, message, function, node, worker, exception_type};
  }
  static failure_info from(const detail::failure& f) {
    return {f.kind, f.code, f.message, f.function, f.node, f.worker, f.exception_type};
  }
  /// A failure, with where it happened as far as known (empty when not).
  static failure_info make(detail::failure_kind kind, error_code code, std::string message,
                           std::string function = {}, std::string node = {},
                           std::string worker = {}) {
    return {kind, code, std::move(message), std::move(function), std::move(node),
            std::move(worker), {}};
  }
};

} // namespace celer::protocol
