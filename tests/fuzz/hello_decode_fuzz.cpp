// libFuzzer target for the hello decoder (the first frame every connection sends); every
// input must come back as a hello or an error.
//   scripts/fuzz.sh [seconds]     builds it with clang and runs it
#include "transport/wire.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);
  auto h = celer::wire::decode_hello(frame);
  if (h) (void)celer::wire::encode_hello(*h);
  return 0;
}
