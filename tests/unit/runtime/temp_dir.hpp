#pragma once
// A folder of its own under the temp directory for one test, removed with it (whatever it
// holds by then).
//
//   celer_test::temp_dir dir("celer-package");  // /tmp/celer-package-<32 hex digits>/

#include <celer/ids.hpp>

#include <filesystem>
#include <string>
#include <system_error>

namespace celer_test {

struct temp_dir {
  explicit temp_dir(const std::string& prefix = "celer-test")
    : path(std::filesystem::temp_directory_path() / (prefix + "-" + celer::unique_id::random().hex())) {
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::filesystem::path path;
};

} // namespace celer_test
