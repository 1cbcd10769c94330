// What a failed file operation means (io_error.hpp).
#include "io_error.hpp"

#include <cerrno>
#include <cstdlib>
#include <system_error>

namespace celer::actors::detail {

error io_error(int err, std::string_view what, const std::string& path) {
  error_code code = error_code::unavailable;
  std::string why = std::error_code(err, std::generic_category()).message();
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
    code = error_code::resource_exhausted;
    why = "the disk is full (" + why + ")";
  } else if (err == EACCES || err == EPERM || err == EROFS) {
    code = error_code::permission_denied;
    if (const char* confined = std::getenv("CELER_JOB_CONFINED"); confined != nullptr && *confined != '\0' && err != EROFS) {
      why += " (this process runs confined, as " + std::string(confined) +
             ": a job reads and writes only its own folders, the system's, and those its cluster was started with "
             "in CELER_JOB_READ_PATHS and CELER_JOB_WRITE_PATHS; docs/security.md, \"Jobs apart on a machine\")";
    }
  }
  return error(code, std::string(what) + " " + path + ": " + why);
}

} // namespace celer::actors::detail
