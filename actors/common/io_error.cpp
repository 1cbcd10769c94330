// What a failed file operation means (io_error.hpp).
#include "io_error.hpp"

#include <cerrno>
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
  }
  return error(code, std::string(what) + " " + path + ": " + why);
}

} // namespace celer::actors::detail
