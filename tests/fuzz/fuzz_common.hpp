#pragma once
// What the libFuzzer targets of tests/fuzz/ share: splitting one input into frames, and the
// --make-corpus mode that writes each target's seeds (real encoded messages) to a directory.
//   build-fuzz/<target> --make-corpus=tests/fuzz/corpus/<target>     (scripts/fuzz.sh --make-corpus)

#include "transport/wire.hpp"

#include <celer/version.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace celer::fuzz {

/// Splits an input into frames, each a 2-byte little-endian length then that many bytes (a
/// length past the end takes what is left). At most `max_frames`.
inline std::vector<std::string_view> split_frames(const std::uint8_t* data, std::size_t size,
                                                  std::size_t max_frames) {
  std::vector<std::string_view> frames;
  std::size_t at = 0;
  while (at + 2 <= size && frames.size() < max_frames) {
    const std::size_t n = std::min<std::size_t>(data[at] | (std::size_t{data[at + 1]} << 8),
                                                size - at - 2);
    frames.emplace_back(reinterpret_cast<const char*>(data + at + 2), n);
    at += 2 + n;
  }
  return frames;
}

/// The inverse of split_frames.
inline std::string join_frames(const std::vector<std::string>& frames) {
  std::string out;
  for (const auto& f : frames) {
    const std::size_t n = std::min<std::size_t>(f.size(), 0xffff);
    out += static_cast<char>(n & 0xff);
    out += static_cast<char>(n >> 8);
    out.append(f, 0, n);
  }
  return out;
}

/// The header wire::encode would write for a body of `body_size` bytes and `bulk` frames.
inline std::string header_for(std::uint32_t type, std::size_t body_size, std::size_t bulk) {
  return detail::pack(wire::header{std::string(wire::magic), protocol_version, type, body_size,
                                   static_cast<std::uint32_t>(bulk)});
}

/// The type tag of message type T (its index in protocol::message).
template <class T>
constexpr std::uint32_t tag_of() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    std::uint32_t tag = 0;
    ((std::is_same_v<T, std::variant_alternative_t<I, protocol::message>> ? (tag = I, 0) : 0), ...);
    return tag;
  }(std::make_index_sequence<std::variant_size_v<protocol::message>>{});
}

/// What a decoded message must satisfy: it encodes, and what it encodes to decodes to a
/// message that encodes to the same frames. Aborts (a finding) otherwise.
inline void check_round_trip(const protocol::message& m) {
  const auto frames = wire::encode(m);
  std::vector<std::string_view> views(frames.begin(), frames.end());
  auto again = wire::decode(views, std::size_t{1} << 30);
  if (!again) {
    std::fprintf(stderr, "a decoded %s does not decode again: %s\n", protocol::name_of(m),
                 again.error().message().c_str());
    std::abort();
  }
  if (wire::encode(*again) != frames) {
    std::fprintf(stderr, "a decoded %s changes when encoded again\n", protocol::name_of(m));
    std::abort();
  }
}

/// Handles --make-corpus=DIR (libFuzzer ignores flags that start with "--"): writes the
/// seeds `make` returns into DIR, one file each, and exits.
inline void maybe_make_corpus(int* argc, char*** argv,
                              const std::function<std::vector<std::string>()>& make) {
  constexpr std::string_view flag = "--make-corpus=";
  for (int i = 1; i < *argc; ++i) {
    const std::string_view arg = (*argv)[i];
    if (arg.substr(0, flag.size()) != flag) continue;
    const std::string dir(arg.substr(flag.size()));
    const auto seeds = make();
    for (std::size_t k = 0; k < seeds.size(); ++k) {
      char name[32];
      std::snprintf(name, sizeof name, "/seed-%03zu", k);
      std::FILE* f = std::fopen((dir + name).c_str(), "wb");
      if (f == nullptr || std::fwrite(seeds[k].data(), 1, seeds[k].size(), f) != seeds[k].size()) {
        std::fprintf(stderr, "cannot write %s%s\n", dir.c_str(), name);
        std::exit(1);
      }
      std::fclose(f);
    }
    std::fprintf(stderr, "%zu seeds written to %s\n", seeds.size(), dir.c_str());
    std::exit(0);
  }
}

/// A task spec with every kind of argument, one of them `big` bytes long.
inline protocol::task_spec sample_spec(std::size_t big) {
  protocol::task_spec s;
  s.id = task_id{unique_id{1, 2}};
  s.function = "add";
  s.args.push_back({false, {}, {}, detail::pack(1)});
  s.args.push_back({true, object_id{unique_id{3, 4}}, address{unique_id{5, 6}, "tcp://a:1"}, {}});
  s.args.push_back({false, {}, {}, std::string(big, 'v')});
  s.resources = *protocol::make_request(1, 0.5, 0, {{"ssd", 2}});
  s.owner = address{unique_id{7, 8}, "tcp://b:2"};
  return s;
}

/// One message of every type (defaults), and some with fields filled in, bulk values `big`
/// bytes long (at least protocol::bulk::threshold: they become bulk frames).
inline std::vector<protocol::message> sample_messages(std::size_t big) {
  std::vector<protocol::message> all;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (all.emplace_back(std::in_place_index<I>), ...);
  }(std::make_index_sequence<std::variant_size_v<protocol::message>>{});
  all.push_back(protocol::request_lease{sample_spec(big), true});
  all.push_back(protocol::execute_task{sample_spec(big)});
  protocol::task_result r;
  r.task = task_id{unique_id{9, 9}};
  protocol::object_payload a, b;
  a.ok = b.ok = true;
  a.payload = std::string(big, 'a');
  b.payload = "small";
  r.returns = {a, b, a};
  all.push_back(r);
  protocol::object_reply o;
  o.object = a;
  all.push_back(o);
  protocol::store_chunk c;
  c.request_id = 3;
  c.ok = true;
  c.data = std::string(big, 'c');
  all.push_back(c);
  return all;
}

/// Encoded frames with every bulk frame cut to a few bytes: the decoder accepts any size,
/// and small seeds keep the fuzzer fast.
inline std::vector<std::string> small_frames(const protocol::message& m, std::size_t keep = 8) {
  auto frames = wire::encode(m);
  for (std::size_t i = 1; i < frames.size(); ++i) frames[i].resize(std::min(keep, frames[i].size()));
  return frames;
}

/// The msgpack body of `m`'s message frame.
inline std::string body_of(const protocol::message& m) {
  const auto frames = wire::encode(m);
  return std::string(wire::split(frames[0])->body);
}

} // namespace celer::fuzz
