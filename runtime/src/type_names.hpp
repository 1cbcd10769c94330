#pragma once
// Type names as a person reads them: "std::invalid_argument", not "St16invalid_argument".
// For error messages (the type of an exception a task threw, the class of an actor) only;
// nothing here is on a hot path.
//
//   catch (const std::exception& e) { fail.exception_type = type_name(typeid(e)); }
//   catch (...) { fail.exception_type = current_exception_type(); }   // "int" for throw 42

#include <string>
#include <typeinfo>

namespace celer {

/// `mangled` (a typeid name) demangled; `mangled` itself when it cannot be.
std::string demangled(const char* mangled);
/// The type's name, demangled.
std::string type_name(const std::type_info& type);
/// Inside a catch block: the type of the exception being handled, demangled ("unknown"
/// when the runtime cannot say).
std::string current_exception_type();

} // namespace celer
