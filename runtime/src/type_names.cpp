// Type names as a person reads them (type_names.hpp).
#include "type_names.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace celer {

std::string demangled(const char* mangled) {
  if (mangled == nullptr) return "unknown";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
    abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(mangled);
}

std::string type_name(const std::type_info& type) { return demangled(type.name()); }

std::string current_exception_type() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  return type == nullptr ? std::string("unknown") : type_name(*type);
}

} // namespace celer
