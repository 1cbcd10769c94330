// libFuzzer target for the decoding of a whole multipart message as the transport receives
// it: the input is split into frames (fuzz_common.hpp: split_frames; the message frame
// (body, header, the header's length) then bulk frames, or any number of anything), and its
// first byte picks the size limit. Every input must come back as a message or an error; what
// decodes must encode again.
//
// The transport's own assembly (ZeroMQ routing frames, the hello, per-connection state) is
// in zmq_transport.cpp and not reached here; see docs/security.md.
//   scripts/fuzz.sh              builds every target with clang and runs it (see the script)
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  celer::fuzz::maybe_make_corpus(argc, argv, [] {
    std::vector<std::string> seeds;
    for (const auto& m : celer::fuzz::sample_messages(celer::protocol::bulk::threshold)) {
      // Limit 1 MiB (byte 12: 1 << (8 + 12)).
      seeds.push_back(std::string(1, '\x0c') + celer::fuzz::join_frames(celer::fuzz::small_frames(m)));
    }
    return seeds;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t limit = std::size_t{1} << (8 + data[0] % 13);  // 256 B .. 1 MiB
  const auto frames = celer::fuzz::split_frames(data + 1, size - 1, /*max_frames=*/64);
  auto m = celer::wire::decode(frames, limit);
  if (m) celer::fuzz::check_round_trip(*m);
  return 0;
}
