#pragma once
/// A shared library opened with dlopen, for the vendor libraries loaded at run time so that
/// celer builds and runs where they are absent: NVML and the CUDA driver (gpu/), NCCL and the
/// CUDA driver (the collective's nccl_group).
///
///   auto lib = celer::detail::shared_library::open("libnccl.so.2");
///   if (!lib) ...;                                    // not installed here
///   int (*get_version)(int*) = nullptr;
///   if (!lib->resolve(get_version, "ncclGetVersion")) ...

#include <dlfcn.h>

#include <optional>
#include <string>
#include <utility>

namespace celer::detail {

/// An open library; closes it (dlclose) when destroyed. Move-only.
class shared_library {
public:
  /// Opens `path` (a name the dynamic linker searches for, or a path); nullopt when it cannot.
  static std::optional<shared_library> open(const std::string& path) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return std::nullopt;
    return shared_library(handle);
  }

  shared_library(shared_library&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  shared_library& operator=(shared_library&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  shared_library(const shared_library&) = delete;
  shared_library& operator=(const shared_library&) = delete;
  ~shared_library() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }

  /// Sets `fn` to the function `name`; false (and `fn` null) when the library lacks it.
  template <class Function>
  bool resolve(Function*& fn, const char* name) const {
    fn = reinterpret_cast<Function*>(::dlsym(handle_, name));
    return fn != nullptr;
  }

private:
  explicit shared_library(void* handle) : handle_(handle) {}
  void* handle_ = nullptr;
};

} // namespace celer::detail
