#include "node/job_fence.hpp"

#include <celer/store/object_store.hpp>

namespace celer {

bool job_fence::allows(const job_id& sender, const object_id& id, const char* what) {
  if (sender.nil()) return true;
  // The job recorded at store_create (or at the store_get that pulled the copy here): the
  // transport checked that the creator named its own job there.
  const auto job = objects_.job_of(id);
  if (!job || *job == sender) return true;
  ++refused_;
  denials_.warn("permission_denied: job " + sender.short_hex() + " asked to " + what + " object " + id.short_hex() +
                " of job " + job_id(*job).short_hex() + "; refused");
  return false;
}

} // namespace celer
