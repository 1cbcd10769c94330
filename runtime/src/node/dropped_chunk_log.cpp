#include "node/dropped_chunk_log.hpp"

#include "log.hpp"

namespace celer {

void dropped_chunk_log::drop(const protocol::store_chunk& m, const std::string& why,
                             std::chrono::steady_clock::time_point now) {
  ++count_;
  if (now - second_ >= std::chrono::seconds(1)) {
    if (lines_ > lines_per_second) {
      CELER_LOG(warn, "store", std::to_string(lines_ - lines_per_second) + " more chunk(s) dropped in the last second");
    }
    second_ = now;
    lines_ = 0;
  }
  if (++lines_ > lines_per_second) return;
  CELER_LOG(warn, "store", "dropped a chunk of object " + m.id.hex() + " (offset " + std::to_string(m.offset) + ", " +
                             std::to_string(m.data.size()) + " bytes): " + why);
}

} // namespace celer
