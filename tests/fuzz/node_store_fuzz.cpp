// libFuzzer target for the node store's handlers: a sequence of events, each a frame
// (fuzz_common.hpp: split_frames) whose first byte picks what happens and whose rest is
// its argument:
//   0-7   a store_create, store_seal, store_get, store_release, store_free, store_pull,
//         store_chunk or store_stats_query whose msgpack body is the rest, decoded through
//         wire::decode (a correct header is made for it) and handed to the store
//   8     the clock moves on by (next byte) x 100 ms, and stuck pulls expire
//   9     the chunks the store asked for arrive (first byte: flags bending them: not ok,
//         bad checksum, one byte short or long, another offset; second: their fill byte)
//   10    the process at the endpoint in the rest is gone
//   11    a job seen in a message ends; 12: a node seen as a pull source dies
// Nothing may crash, no byte may be written outside the store's memory, and the store
// never holds more than its capacity.
//   scripts/fuzz.sh              builds every target with clang and runs it (see the script)
#include "fuzz_common.hpp"

#include "fakes/recording_transport.hpp"
#include "node/node_store.hpp"

#include <celer/store/checksum.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>

namespace {

using namespace celer;

constexpr std::uint32_t store_types[] = {
  fuzz::tag_of<protocol::store_create>(), fuzz::tag_of<protocol::store_seal>(),
  fuzz::tag_of<protocol::store_get>(),    fuzz::tag_of<protocol::store_release>(),
  fuzz::tag_of<protocol::store_free>(),   fuzz::tag_of<protocol::store_pull>(),
  fuzz::tag_of<protocol::store_chunk>(),  fuzz::tag_of<protocol::store_stats_query>(),
};
constexpr std::size_t capacity = 256 << 10;

std::chrono::steady_clock::time_point fake_now{};

std::string event(std::uint8_t op, const std::string& arg) { return std::string(1, static_cast<char>(op)) + arg; }

template <class T>
std::string message_event(const T& m) {
  for (std::uint8_t i = 0; i < 8; ++i) {
    if (store_types[i] == fuzz::tag_of<T>()) return event(i, fuzz::body_of(protocol::message(m)));
  }
  std::abort();
}

/// Seeds: short, coherent histories (one object created, sealed, read, pulled), so that
/// mutations start from ids that match.
std::vector<std::string> make_seeds() {
  const address self{unique_id{1, 1}, "tcp://127.0.0.1:1"};
  const address client{unique_id{2, 2}, "ipc://client"};
  const address peer{unique_id{3, 3}, "tcp://127.0.0.1:3"};
  const object_id id{unique_id{4, 4}};
  const object_id remote{unique_id{5, 5}};
  const job_id job{unique_id{6, 6}};
  using fuzz::join_frames;
  std::vector<std::string> seeds;
  const auto create = message_event(protocol::store_create{1, client, id, 1000, 0, client, job, false});
  const auto seal = message_event(protocol::store_seal{2, client, id});
  const auto get = message_event(protocol::store_get{3, client, id, {}, 1000, 0, client, job});
  const auto release = message_event(protocol::store_release{id, client, false});
  const auto pull_get =
    message_event(protocol::store_get{4, client, remote, peer, 100000, 0, client, job});
  const auto serve = message_event(protocol::store_pull{7, peer, id, 0, 1000});
  const auto serve_past = message_event(protocol::store_pull{7, peer, id, 999, 2});
  const auto free_it = message_event(protocol::store_free{{id, remote}});
  const auto stats = message_event(protocol::store_stats_query{9, client});
  protocol::store_chunk forged;
  forged.request_id = 1;
  forged.id = remote;
  forged.offset = 0;
  forged.ok = true;
  forged.data = std::string(64, 'f');
  forged.checksum = store::checksum(forged.data.data(), forged.data.size());
  const auto forged_chunk = message_event(forged);
  const auto huge = message_event(
    protocol::store_create{1, client, id, ~std::uint64_t{0}, 0, client, job, false});
  seeds.push_back(join_frames({create, seal, get, release, free_it, stats}));
  seeds.push_back(join_frames({create, seal, serve, serve_past, event(10, "ipc://client")}));
  seeds.push_back(join_frames({pull_get, event(9, std::string("\0p", 2)), event(9, std::string("\0q", 2)),
                               get, event(11, "")}));
  seeds.push_back(join_frames({pull_get, event(9, std::string("\x01p", 2)), forged_chunk}));
  seeds.push_back(join_frames({pull_get, event(9, std::string("\x04p", 2)), event(8, "\x0b"),
                               forged_chunk}));
  seeds.push_back(join_frames({pull_get, event(12, ""), get}));
  seeds.push_back(join_frames({create, get, seal, release, event(10, "ipc://client")}));
  seeds.push_back(join_frames({huge, create, huge}));
  return seeds;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  ::setenv("CELER_LOG_LEVEL", "error", 1);  // dropped chunks are logged: not at fuzzing speed
  fuzz::maybe_make_corpus(argc, argv, make_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fakes::recording_transport net;
  const address self{unique_id{1, 1}, "tcp://127.0.0.1:1"};
  fake_now = {};
  std::unique_ptr<node_store> store;
  try {
    node_store::config cfg{node_id(self.id), self, address{unique_id{9, 9}, "tcp://head:1"},
                           capacity, {}, false};
    cfg.pull_timeout = std::chrono::milliseconds(1000);
    cfg.clock = [] { return fake_now; };
    cfg.pull_id_seed = 1;
    store = std::make_unique<node_store>(net, std::move(cfg));
  } catch (const std::exception&) {
    return 0;  // no shared memory to be had: not the store's logic
  }
  std::vector<job_id> jobs;
  std::vector<node_id> sources;
  std::vector<protocol::store_pull> asked;
  for (const auto frame : fuzz::split_frames(data, size, /*max_frames=*/64)) {
    if (frame.empty()) continue;
    const auto op = static_cast<std::uint8_t>(frame[0]);
    const std::string_view arg = frame.substr(1);
    if (op < 8) {
      const std::string frame =
        wire::message_frame(arg, fuzz::header_for(store_types[op], arg.size(), 0));
      const std::string_view frames[1] = {frame};
      auto m = wire::decode(frames, /*max_body_bytes=*/1 << 20);
      if (!m) continue;
      std::visit(
        [&](auto& msg) {
          if constexpr (requires { store->on(msg); }) {
            if constexpr (requires { msg.job; }) jobs.push_back(msg.job);
            if constexpr (requires { msg.source; }) sources.emplace_back(msg.source.id);
            store->on(msg);
          }
        },
        *m);
    } else if (op == 8) {
      fake_now += std::chrono::milliseconds(100) * (arg.empty() ? 1 : static_cast<std::uint8_t>(arg[0]));
      store->expire_pulls();
    } else if (op == 9) {
      const auto flags = arg.empty() ? 0 : static_cast<std::uint8_t>(arg[0]);
      const char fill = arg.size() > 1 ? arg[1] : 'p';
      for (const auto& q : asked) {
        protocol::store_chunk c;
        c.request_id = q.request_id;
        c.id = q.id;
        c.offset = q.offset + ((flags & 8) ? 64 : 0);
        c.ok = (flags & 1) == 0;
        std::size_t n = q.length;
        if (flags & 4) n = n > 0 ? n - 1 : 0;
        if (flags & 16) ++n;
        if (c.ok) c.data = std::string(n, fill);
        c.checksum = store::checksum(c.data.data(), c.data.size()) ^ ((flags & 2) ? 1 : 0);
        store->on(c);
      }
      asked.clear();
    } else if (op == 10) {
      store->process_gone(std::string(arg));
    } else if (op == 11) {
      if (!jobs.empty()) store->job_finished(jobs[(arg.empty() ? 0 : arg[0] & 0xff) % jobs.size()]);
    } else if (op == 12) {
      if (!sources.empty()) store->node_died(sources[(arg.empty() ? 0 : arg[0] & 0xff) % sources.size()]);
    }
    // Keep the pulls the store asked for (event 9 answers them); forget the rest.
    for (auto& [to, q] : net.take<protocol::store_pull>()) asked.push_back(std::move(q));
    net.sent.clear();
    if (store->stats().bytes_in_memory > capacity) __builtin_trap();
  }
  return 0;
}
