// libFuzzer target for the wire decoder: the input's first byte picks where it splits into
// a header frame and a body frame; every input must come back as a message or an error.
//   scripts/fuzz.sh [seconds]     builds it with clang and runs it
#include "transport/wire.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t split = std::min<std::size_t>(data[0], size - 1);
  const std::string_view all(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string_view frames[2] = {all.substr(0, split), all.substr(split)};
  auto m = celer::wire::decode(frames, /*max_body_bytes=*/1 << 20);
  if (m) {
    // What decodes must encode again.
    (void)celer::wire::encode(*m);
  }
  return 0;
}
