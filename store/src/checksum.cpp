#include <celer/store/checksum.hpp>

#include <xxhash.h>

namespace celer::store {

std::uint64_t checksum(const void* data, std::size_t size) noexcept {
  return XXH3_64bits(data, size);
}

hash128 content_hash(const void* data, std::size_t size) noexcept {
  const XXH128_hash_t h = XXH3_128bits(data, size);
  return hash128{h.high64, h.low64};
}

std::string hash128::hex() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[static_cast<std::size_t>(15 - i)] = digits[(high >> (4 * i)) & 0xf];
    out[static_cast<std::size_t>(31 - i)] = digits[(low >> (4 * i)) & 0xf];
  }
  return out;
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
