#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/sharding.hpp>

#include <cstdio>

namespace celer::preprocess {

void key_digest::add(std::string_view key) noexcept {
  ++count;
  sum += stable_hash64(key, 0x6b6579);
}

std::string key_digest::hex() const {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(sum));
  return out;
}

} // namespace celer::preprocess
