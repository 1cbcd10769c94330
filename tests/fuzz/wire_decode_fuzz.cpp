// libFuzzer target for the wire decoder: the input's first byte picks where it splits into
// a header and a body, which the harness puts into a message frame (body, header, the
// header's length); every input must come back as a message or an error, and a message must
// survive encoding again. (A frame whose length byte is wrong: multipart_decode_fuzz.)
//   scripts/fuzz.sh              builds every target with clang and runs it (see the script)
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  celer::fuzz::maybe_make_corpus(argc, argv, [] {
    std::vector<std::string> seeds;
    for (const auto& m : celer::fuzz::sample_messages(/*big=*/100)) {  // inline values only
      const auto frames = celer::wire::encode(m);
      const auto parts = *celer::wire::split(frames[0]);
      seeds.push_back(std::string(1, static_cast<char>(parts.header.size())) +
                      std::string(parts.header) + std::string(parts.body));
    }
    return seeds;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t split = std::min<std::size_t>(data[0], size - 1);
  const std::string_view all(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string frame = celer::wire::message_frame(all.substr(split), all.substr(0, split));
  const std::string_view frames[1] = {frame};
  auto m = celer::wire::decode(frames, /*max_body_bytes=*/1 << 20);
  if (m) celer::fuzz::check_round_trip(*m);
  return 0;
}
