#include <celer/store/checksum.hpp>

#include <xxhash.h>

namespace celer::store {

std::uint64_t checksum(const void* data, std::size_t size) noexcept {
  return XXH3_64bits(data, size);
}

struct running_checksum::state {
  XXH3_state_t* xxh = XXH3_createState();
  ~state() { XXH3_freeState(xxh); }
};

running_checksum::running_checksum() : state_(std::make_unique<state>()) {
  XXH3_64bits_reset(state_->xxh);
}
running_checksum::~running_checksum() = default;

void running_checksum::update(const void* data, std::size_t size) noexcept {
  XXH3_64bits_update(state_->xxh, data, size);
}

std::uint64_t running_checksum::digest() const noexcept { return XXH3_64bits_digest(state_->xxh); }

} // namespace celer::store
