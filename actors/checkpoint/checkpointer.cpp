// The saving side: checkpointer (asynchronous, through writer actors) and write() (the same
// work in the caller's thread).
#include <celer/actors/checkpoint.hpp>

#include <celer/api.hpp>

#include <cstdio>
#include <deque>
#include <filesystem>

#include "manifest.hpp"
#include "tier_writer.hpp"
#include "writer_actor.hpp"

namespace celer::checkpoint {
namespace {

using clock = std::chrono::steady_clock;
using detail::commit_header;
using detail::commit_result;
using detail::writer_actor;
using detail::writer_config;

expected<void> check(const options& o) {
  auto bad = [](const std::string& why) { return error(error_code::invalid_argument, why); };
  if (o.fast_dir.empty() && o.archive_dir.empty()) {
    return bad("checkpoint options name no tier: set fast_dir, archive_dir or both");
  }
  if (o.max_pending == 0) return bad("checkpoint max_pending must be at least 1");
  if (!o.fast_dir.empty() && o.fast_keep_last == 0) {
    return bad("checkpoint fast_keep_last must be at least 1 (0 would remove what it writes)");
  }
  if (!o.archive_dir.empty() && o.archive_keep_last == 0) {
    return bad("checkpoint archive_keep_last must be at least 1 (0 would remove what it writes)");
  }
  if (o.archive_keep_every_steps < 0) return bad("checkpoint archive_keep_every_steps is negative");
  const auto& c = o.chunks;
  if (c.min_bytes == 0 || c.min_bytes > c.avg_bytes || c.avg_bytes > c.max_bytes) {
    return bad("checkpoint chunking needs 0 < min_bytes <= avg_bytes <= max_bytes");
  }
  // A piece is one msgpack bin (32-bit length) and one object in the store.
  if (o.segment_bytes == 0 || o.segment_bytes > (std::size_t{1} << 31)) {
    return bad("checkpoint segment_bytes must be between 1 and 2 GiB");
  }
  return {};
}

std::vector<writer_config> configs(const options& o) {
  std::vector<writer_config> out;
  auto make = [&](std::string kind, const std::string& dir, std::size_t keep, std::int64_t every) {
    // The saver's relative path, made absolute here: on a cluster the writer is an actor in a
    // worker process of this node, whose working directory is not the saver's.
    std::error_code ec;
    auto absolute = std::filesystem::absolute(dir, ec);
    out.push_back({std::move(kind), ec ? dir : absolute.lexically_normal().string(), keep, every,
                   o.chunks.min_bytes, o.chunks.avg_bytes, o.chunks.max_bytes, o.segment_bytes});
  };
  if (!o.fast_dir.empty()) make("fast", o.fast_dir, o.fast_keep_last, 0);
  if (!o.archive_dir.empty()) {
    make("archive", o.archive_dir, o.archive_keep_last, o.archive_keep_every_steps);
  }
  return out;
}

expected<void> check(const snapshot& s) {
  for (const auto& e : s.entries()) {
    if (e.name.empty()) return error(error_code::invalid_argument, "a snapshot entry has no name");
  }
  return {};
}

/// The commit's description of `s`. Small values that are valid UTF-8 travel (and are
/// stored) inline; everything else goes by pieces.
commit_header header_of(const snapshot& s, std::uint64_t id, std::int64_t started_ns) {
  commit_header h;
  h.id = id;
  h.step = s.step();
  h.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  h.metadata = s.metadata();
  h.save_started_ns = started_ns;
  for (const auto& e : s.entries()) {
    detail::entry_header eh;
    eh.name = e.name;
    eh.type = static_cast<std::uint8_t>(e.type);
    eh.attributes = e.attributes;
    eh.size = e.data.size();
    if (e.type != value_type::bytes && detail::is_utf8(e.data.view())) {
      eh.is_inline = true;
      eh.value = std::string(e.data.view());
    }
    h.entries.push_back(std::move(eh));
  }
  return h;
}

/// Calls `piece(entry index, offset, bytes)` for each piece of the entries not inline.
template <class F>
void for_each_piece(const snapshot& s, const commit_header& h, std::size_t segment, F piece) {
  for (std::size_t i = 0; i < h.entries.size(); ++i) {
    if (h.entries[i].is_inline) continue;
    const auto& data = s.entries()[i].data;
    for (std::size_t off = 0; off < data.size(); off += segment) {
      const std::size_t n = std::min(segment, data.size() - off);
      piece(static_cast<std::uint32_t>(i), off,
            std::string_view(reinterpret_cast<const char*>(data.data()) + off, n));
    }
  }
}

/// Fills one tier's part of `r` from its writer's answer.
void fill(save_report& r, const std::string& kind, const commit_result& c, std::int64_t started) {
  tier_report& t = kind == "fast" ? r.fast : r.archive;
  t.used = true;
  t.chunks = c.chunks;
  t.chunks_written = c.chunks_written;
  t.bytes_written = c.bytes_written;
  t.manifest_bytes = c.manifest_bytes;
  t.checkpoints_removed = c.checkpoints_removed;
  t.chunks_removed = c.chunks_removed;
  t.busy = std::chrono::nanoseconds(c.busy_ns);
  t.durable_after = std::chrono::nanoseconds(c.durable_at_ns - started);
  t.node = c.node;
}

error failed_save(std::uint64_t id, std::int64_t step, const std::string& kind, error_code code,
                  const std::string& why) {
  return error(code, "checkpoint " + std::to_string(id) + " (step " + std::to_string(step) +
                       "), " + kind + " tier: " + why);
}

} // namespace

struct checkpointer::impl {
  struct writer {
    std::string kind;
    actor_handle<writer_actor> handle;
  };
  struct in_flight {
    std::uint64_t id = 0;
    std::int64_t step = 0;
    std::uint64_t logical = 0;
    std::int64_t started_ns = 0;
    std::chrono::nanoseconds blocked{0};
    std::chrono::nanoseconds queued{0};
    std::vector<object_ref<commit_result>> commits;  // one per writer, in writers' order
  };

  options opts;
  std::vector<writer> writers;
  std::uint64_t next_id = 1;
  std::deque<in_flight> pending;
  std::vector<save_report> reports;
  std::vector<error> failures;

  impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  /// Waits for the saves in flight, then stops the writers.
  ~impl() { stop(); }

  /// Waits for the oldest save and files its report or its failure.
  void collect_oldest() {
    in_flight f = std::move(pending.front());
    pending.pop_front();
    save_report r;
    r.id = f.id;
    r.step = f.step;
    r.logical_bytes = f.logical;
    r.blocked = f.blocked;
    r.queued = f.queued;
    bool ok = true;
    for (std::size_t k = 0; k < writers.size(); ++k) {
      auto got = celer::try_get(f.commits[k]);
      if (!got) {
        failures.push_back(failed_save(f.id, f.step, writers[k].kind, got.error().code(),
                                       "its writer failed: " + got.error().message()));
        ok = false;
      } else if (got->code != 0) {
        failures.push_back(failed_save(f.id, f.step, writers[k].kind,
                                       static_cast<error_code>(got->code), got->message));
        ok = false;
      } else {
        fill(r, writers[k].kind, *got, f.started_ns);
      }
    }
    if (ok) reports.push_back(std::move(r));
  }

  /// Files the saves at the front that are done, without waiting.
  void collect_done() {
    while (!pending.empty()) {
      auto& refs = pending.front().commits;
      auto ready = celer::wait(refs, refs.size(), std::chrono::nanoseconds(0));
      if (!ready.pending.empty()) return;
      collect_oldest();
    }
  }

  void stop() noexcept {
    try {
      if (!celer::is_initialized()) return;
      while (!pending.empty()) collect_oldest();
      if (!failures.empty()) {
        std::fprintf(stderr, "celer::checkpoint: %zu save(s) failed and were never waited for: %s\n",
                     failures.size(), failures.front().to_string().c_str());
      }
      // Close first and wait for it, so that the tiers' locks are free when this returns;
      // a writer that died has nothing to close.
      std::vector<object_ref<bool>> closed;
      for (auto& w : writers) closed.push_back(w.handle.task(&writer_actor::close).remote());
      for (auto& c : closed) (void)celer::try_get(c);
      for (auto& w : writers) celer::kill(w.handle);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "celer::checkpoint: stopping the writers: %s\n", e.what());
    }
    writers.clear();
  }
};

checkpointer::checkpointer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
checkpointer::checkpointer(checkpointer&&) noexcept = default;
checkpointer& checkpointer::operator=(checkpointer&&) noexcept = default;
checkpointer::~checkpointer() = default;

expected<checkpointer> checkpointer::open(options opts) {
  if (auto ok = check(opts); !ok) return ok.error();
  if (!celer::is_initialized()) {
    return error(error_code::failed_precondition,
                 "a checkpointer needs the runtime: call celer::init first (or use write())");
  }
  auto p = std::make_unique<impl>();
  p->opts = opts;
  try {
    // On this node: the fast tier is its disk, and the pieces are objects in its store.
    const auto here = scheduling_strategy::node_affinity(celer::current_node_id());
    for (auto& c : configs(opts)) {
      auto kind = c.kind;
      auto h = celer::actor(detail::make_writer_actor)
                 .options({.scheduling = here, .max_restarts = -1})
                 .remote(std::move(c));
      p->writers.push_back({std::move(kind), h});
    }
    std::vector<object_ref<detail::probe_result>> probes;
    for (auto& w : p->writers) probes.push_back(w.handle.task(&writer_actor::probe).remote());
    for (std::size_t k = 0; k < probes.size(); ++k) {
      auto got = celer::try_get(probes[k]);
      if (!got) return got.error();  // p's destructor stops the writers
      if (got->code != 0) return error(static_cast<error_code>(got->code), got->message);
      p->next_id = std::max(p->next_id, got->newest_id + 1);
    }
  } catch (const celer::exception& e) {
    return error(e.code(), std::string("starting the checkpoint writers: ") + e.what());
  }
  return checkpointer(std::move(p));
}

expected<std::uint64_t> checkpointer::save(const snapshot& s) {
  // The runtime's calls throw (it may have been shut down); no exception leaves here.
  try {
    return save_now(s);
  } catch (const celer::exception& e) {
    return error(e.code(), std::string("saving a checkpoint: ") + e.what());
  }
}

expected<std::uint64_t> checkpointer::save_now(const snapshot& s) {
  const auto start = clock::now();
  const std::int64_t started_ns = detail::monotonic_ns();
  if (auto ok = check(s); !ok) return ok.error();
  auto& m = *impl_;
  m.collect_done();
  const auto queue_start = clock::now();
  while (m.pending.size() >= m.opts.max_pending) m.collect_oldest();
  const auto queued = clock::now() - queue_start;

  impl::in_flight f;
  f.id = m.next_id++;
  f.step = s.step();
  f.logical = s.logical_bytes();
  f.started_ns = started_ns;
  f.queued = queued;
  const commit_header h = header_of(s, f.id, started_ns);
  try {
    // The one copy: each piece into the node's store. The writers map it from there.
    struct piece_ref {
      std::uint32_t entry;
      std::uint64_t offset;
      object_ref<celer::bytes> ref;
    };
    std::vector<piece_ref> pieces;
    for_each_piece(s, h, m.opts.segment_bytes,
                   [&](std::uint32_t entry, std::uint64_t offset, std::string_view bytes) {
                     pieces.push_back(
                       {entry, offset, celer::put(celer::bytes(bytes.data(), bytes.size(), nullptr))});
                   });
    for (auto& w : m.writers) {
      for (const auto& p : pieces) {
        (void)w.handle.task(&writer_actor::add_segment).remote(f.id, p.entry, p.offset, p.ref);
      }
      f.commits.push_back(w.handle.task(&writer_actor::commit).remote(h));
    }
  } catch (const celer::exception& e) {
    // Some writers may have pieces of this save: they drop them when their memory of it
    // is never committed, and the chunks go with the next retention.
    return error(e.code(), "checkpoint " + std::to_string(f.id) + " (step " +
                             std::to_string(f.step) + "): copying it out: " + e.what());
  }
  f.blocked = clock::now() - start;
  const auto id = f.id;
  m.pending.push_back(std::move(f));
  return id;
}

expected<void> checkpointer::wait() {
  auto& m = *impl_;
  try {
    while (!m.pending.empty()) m.collect_oldest();
  } catch (const celer::exception& e) {
    return error(e.code(), std::string("waiting for checkpoints: ") + e.what());
  }
  if (m.failures.empty()) return {};
  error first = m.failures.front();
  if (m.failures.size() > 1) {
    first = error(first.code(), first.message() + " (and " +
                                  std::to_string(m.failures.size() - 1) + " more failure(s))");
  }
  m.failures.clear();
  return first;
}

std::vector<save_report> checkpointer::take_reports() {
  std::vector<save_report> out;
  out.swap(impl_->reports);
  return out;
}

std::size_t checkpointer::pending() const noexcept { return impl_->pending.size(); }

expected<save_report> write(const snapshot& s, const options& opts) {
  const auto start = clock::now();
  const std::int64_t started_ns = detail::monotonic_ns();
  if (auto ok = check(opts); !ok) return ok.error();
  if (auto ok = check(s); !ok) return ok.error();
  std::vector<std::pair<std::string, std::unique_ptr<detail::tier_writer>>> writers;
  std::uint64_t id = 1;
  for (auto& c : configs(opts)) {
    auto kind = c.kind;
    writers.emplace_back(std::move(kind), std::make_unique<detail::tier_writer>(std::move(c)));
    const auto p = writers.back().second->probe();
    if (p.code != 0) return error(static_cast<error_code>(p.code), p.message);
    id = std::max(id, p.newest_id + 1);
  }
  const commit_header h = header_of(s, id, started_ns);
  for (auto& [kind, w] : writers) {
    for_each_piece(s, h, opts.segment_bytes,
                   [&](std::uint32_t entry, std::uint64_t offset, std::string_view bytes) {
                     w->add_segment(id, entry, offset, bytes);
                   });
  }
  save_report r;
  r.id = id;
  r.step = s.step();
  r.logical_bytes = s.logical_bytes();
  for (auto& [kind, w] : writers) {
    const auto c = w->commit(h);
    if (c.code != 0) {
      return failed_save(id, r.step, kind, static_cast<error_code>(c.code), c.message);
    }
    fill(r, kind, c, started_ns);
  }
  r.blocked = clock::now() - start;
  return r;
}

} // namespace celer::checkpoint
