#pragma once
/// Errors: the codes every celer call reports, `celer::expected<T>` for code that prefers
/// values, and the typed exceptions `celer::get` throws.
///
///   try {
///     int v = celer::get(ref);
///   } catch (const celer::task_error& e) {        // remote code threw
///     if (e.exception_type() == "std::invalid_argument") { ... }   // by the remote type
///     std::cerr << e.function() << " failed on " << e.node() << ": " << e.what();
///   } catch (const celer::exception& e) {         // any other celer error
///     std::cerr << celer::to_string(e.code()) << ": " << e.what();
///   }

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace celer {

/// One enum of Abseil-like codes; detail goes in the message, not in new codes.
enum class error_code : unsigned char {
  ok = 0,
  cancelled,
  invalid_argument,
  deadline_exceeded,
  not_found,
  already_exists,
  permission_denied,
  resource_exhausted,
  failed_precondition,
  unavailable,
  data_loss,
  internal,
  unauthenticated,
};

/// The code's name, e.g. "invalid_argument".
std::string_view to_string(error_code code) noexcept;

/// What went wrong: a code and a message a user can act on.
class error {
public:
  error() = default;
  error(error_code code, std::string message) : code_(code), message_(std::move(message)) {}
  [[nodiscard]] error_code code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// "code: message".
  [[nodiscard]] std::string to_string() const;

private:
  error_code code_ = error_code::internal;
  std::string message_;
};

/// A value or an error. Functions inside the runtime that can fail return it.
template <class T>
class [[nodiscard]] expected {
public:
  expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  expected(celer::error err) : state_(std::in_place_index<1>, std::move(err)) {}
  [[nodiscard]] bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  [[nodiscard]] const celer::error& error() const { return std::get<1>(state_); }

private:
  std::variant<T, celer::error> state_;
};

/// `expected<void>`: success or an error.
template <>
class [[nodiscard]] expected<void> {
public:
  expected() = default;
  expected(celer::error err) : err_(std::move(err)), ok_(false) {}
  [[nodiscard]] bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  [[nodiscard]] const celer::error& error() const { return err_; }

private:
  celer::error err_;
  bool ok_ = true;
};

/// Base of every exception celer throws to user code.
class exception : public std::runtime_error {
public:
  exception(error_code code, const std::string& message)
    : std::runtime_error(message), code_(code) {}
  [[nodiscard]] error_code code() const noexcept { return code_; }

private:
  error_code code_;
};

/// Remote code threw: names the function, where it ran, the exception's type and its
/// message. what(): "task F failed on node N, worker W: std::invalid_argument: bad input".
class task_error : public exception {
public:
  task_error(std::string function, std::string node, std::string worker, std::string message,
             std::string exception_type = {});
  [[nodiscard]] const std::string& function() const noexcept { return function_; }
  [[nodiscard]] const std::string& node() const noexcept { return node_; }
  [[nodiscard]] const std::string& worker() const noexcept { return worker_; }
  /// The message of the exception thrown remotely, without the location prefix.
  [[nodiscard]] const std::string& remote_message() const noexcept { return remote_message_; }
  /// The dynamic type of the exception thrown remotely, demangled: "std::invalid_argument",
  /// "app::parse_error", "int" for `throw 42`. Compare it to catch by the remote category.
  [[nodiscard]] const std::string& exception_type() const noexcept { return exception_type_; }

private:
  std::string function_, node_, worker_, remote_message_, exception_type_;
};

/// The actor that should run the call is dead (killed, or its worker or node died).
class actor_died_error : public exception {
public:
  explicit actor_died_error(const std::string& message)
    : exception(error_code::unavailable, message) {}
};

/// The actor was preempted: a request of higher priority needed its resources (it opted in
/// with actor_options::preemptible). Catch it to create the actor again from its checkpoint.
class actor_preempted_error : public actor_died_error {
public:
  explicit actor_preempted_error(const std::string& message) : actor_died_error(message) {}
};

/// The node that ran (or queued) the task died before the task finished (cluster mode).
class node_died_error : public exception {
public:
  explicit node_died_error(const std::string& message)
    : exception(error_code::unavailable, message) {}
};

/// The worker process running the task died (killed, crashed) before it finished.
class worker_died_error : public exception {
public:
  explicit worker_died_error(const std::string& message)
    : exception(error_code::unavailable, message) {}
};

/// The object is gone (freed, or its only copy was lost with its node) and cannot be made
/// again. The message says what made it and why it is not rebuilt; origin() names it:
/// "celer::put" for a put, the task's function for a task's output, "actor <id>" for an
/// actor method's result, empty when unknown (e.g. an id this process never owned).
class object_lost_error : public exception {
public:
  explicit object_lost_error(const std::string& message, std::string origin = {},
                             std::string node = {})
    : exception(error_code::data_loss, message), origin_(std::move(origin)),
      node_(std::move(node)) {}
  [[nodiscard]] const std::string& origin() const noexcept { return origin_; }
  /// The node it was stored on, when it was lost with that node (short hex).
  [[nodiscard]] const std::string& node() const noexcept { return node_; }

private:
  std::string origin_, node_;
};

/// `get` waited longer than its timeout; the object may still arrive later.
class get_timeout_error : public exception {
public:
  explicit get_timeout_error(const std::string& message)
    : exception(error_code::deadline_exceeded, message) {}
};

/// The task or actor call was cancelled (celer::cancel) before it finished; the message says
/// who cancelled it. A cancelled task is never run again.
class task_cancelled_error : public exception {
public:
  explicit task_cancelled_error(const std::string& message)
    : exception(error_code::cancelled, message) {}
};

/// No node of the cluster could ever satisfy the request (e.g. more CPUs than any node has).
class infeasible_error : public exception {
public:
  explicit infeasible_error(const std::string& message)
    : exception(error_code::resource_exhausted, message) {}
};

/// Throws `err` as the matching exception type (never returns).
[[noreturn]] void throw_error(const error& err);

} // namespace celer
