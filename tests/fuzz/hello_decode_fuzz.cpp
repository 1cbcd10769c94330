// libFuzzer target for the hello decoder (the first frame every connection sends); every
// input must come back as a hello or an error.
//   scripts/fuzz.sh              builds every target with clang and runs it (see the script)
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  celer::fuzz::maybe_make_corpus(argc, argv, [] {
    using celer::wire::hello;
    const std::string magic(celer::wire::magic);
    return std::vector<std::string>{
      celer::wire::encode_hello(hello{magic, celer::protocol_version, "0123456789abcdef0123456789abcdef", "tcp://10.0.0.1:6379"}),
      celer::wire::encode_hello(hello{magic, celer::protocol_version, std::string(64, 't'), ""}),
      celer::wire::encode_hello(hello{magic, celer::protocol_version + 1, "", "x"}),
      celer::wire::encode_hello(hello{"other", celer::protocol_version, "", ""}),
    };
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);
  auto h = celer::wire::decode_hello(frame);
  if (h) {
    auto again = celer::wire::decode_hello(celer::wire::encode_hello(*h));
    if (!again || again->register_job != h->register_job || again->from != h->from) __builtin_trap();
  }
  return 0;
}
