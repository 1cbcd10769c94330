// libFuzzer target for bulk frames: a message body with references (msgpack ext 1) to the
// frames after it. The input is frames (fuzz_common.hpp: split_frames): the first byte picks
// a message type that carries bulk values, then the body, then up to 16 bulk frames. The
// harness writes a correct header, so every input reaches the body and its references.
// A frame named twice, or never, must be refused; what decodes must encode again.
//   scripts/fuzz.sh              builds every target with clang and runs it (see the script)
#include "fuzz_common.hpp"

namespace {

using namespace celer;

constexpr std::uint32_t types[] = {
  fuzz::tag_of<protocol::request_lease>(), fuzz::tag_of<protocol::execute_task>(),
  fuzz::tag_of<protocol::task_result>(),   fuzz::tag_of<protocol::object_reply>(),
  fuzz::tag_of<protocol::store_chunk>(),   fuzz::tag_of<protocol::start_actor>(),
  fuzz::tag_of<protocol::create_actor>(),
};
constexpr std::size_t type_count = sizeof types / sizeof types[0];

} // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::maybe_make_corpus(argc, argv, [] {
    std::vector<std::string> seeds;
    for (const auto& m : fuzz::sample_messages(protocol::bulk::threshold)) {
      std::size_t pick = type_count;
      for (std::size_t i = 0; i < type_count; ++i) {
        if (types[i] == m.index()) pick = i;
      }
      if (pick == type_count) continue;
      auto frames = fuzz::small_frames(m);
      frames[0] = std::string(wire::split(frames[0])->body);  // the harness writes the header
      seeds.push_back(std::string(1, static_cast<char>(pick)) + fuzz::join_frames(frames));
      if (frames.size() > 1) {
        // The same body naming one frame twice (the attack), and with a frame to spare.
        auto twice = frames;
        twice.pop_back();
        seeds.push_back(std::string(1, static_cast<char>(pick)) + fuzz::join_frames(twice));
        auto spare = frames;
        spare.push_back("spare");
        seeds.push_back(std::string(1, static_cast<char>(pick)) + fuzz::join_frames(spare));
      }
    }
    return seeds;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint32_t type = types[data[0] % type_count];
  auto parts = fuzz::split_frames(data + 1, size - 1, /*max_frames=*/17);
  if (parts.empty()) return 0;
  const std::string frame =
    wire::message_frame(parts[0], fuzz::header_for(type, parts[0].size(), parts.size() - 1));
  std::vector<std::string_view> frames{frame};
  frames.insert(frames.end(), parts.begin() + 1, parts.end());
  auto m = wire::decode(frames, /*max_body_bytes=*/1 << 20);
  if (!m) return 0;
  fuzz::check_round_trip(*m);
  return 0;
}
