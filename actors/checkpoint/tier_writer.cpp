#include "tier_writer.hpp"

#include <celer/api.hpp>

#include <set>
#include <unordered_set>

namespace celer::checkpoint::detail {
namespace {

using clock = std::chrono::steady_clock;

commit_result failure(const error& e) {
  commit_result r;
  r.code = static_cast<std::uint8_t>(e.code());
  r.message = e.message();
  return r;
}

node_id this_node() {
  // The runtime knows the node; write() may run without one.
  return celer::is_initialized() ? celer::current_node_id() : node_id();
}

} // namespace

std::int64_t monotonic_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
    .count();
}

tier_writer::tier_writer(writer_config config) : config_(std::move(config)) {
  chunking_.min_bytes = config_.min_bytes;
  chunking_.avg_bytes = config_.avg_bytes;
  chunking_.max_bytes = config_.max_bytes;
  auto t = config_.kind == "fast" ? open_fast_tier(config_.dir, /*read_only=*/false)
                                  : open_archive_tier(config_.dir, /*read_only=*/false);
  if (t) {
    tier_ = std::move(*t);
  } else {
    open_error_ = error(t.error().code(),
                        "the " + config_.kind + " tier cannot be opened: " + t.error().message());
  }
}

probe_result tier_writer::probe() const {
  probe_result r;
  r.node = this_node();
  if (open_error_) {
    r.code = static_cast<std::uint8_t>(open_error_->code());
    r.message = open_error_->message();
    return r;
  }
  auto ids = tier_->manifest_ids();
  if (!ids) {
    r.code = static_cast<std::uint8_t>(ids.error().code());
    r.message = ids.error().message();
    return r;
  }
  r.newest_id = ids->empty() ? 0 : ids->back();
  return r;
}

void tier_writer::add_segment(std::uint64_t id, std::uint32_t entry, std::uint64_t offset,
                              std::string_view bytes) {
  const auto start = clock::now();
  auto& save = pending_[id];
  if (save.failed || open_error_) return;
  if (save.entries.size() <= entry) save.entries.resize(entry + 1);
  auto& e = save.entries[entry];
  if (offset != e.size) {
    save.failed = error(error_code::internal,
                        "entry " + std::to_string(entry) + " of checkpoint " + std::to_string(id) +
                          ": a piece at offset " + std::to_string(offset) + " came after " +
                          std::to_string(e.size) + " bytes");
    return;
  }
  e.sum->update(bytes.data(), bytes.size());
  std::vector<chunk_write> fresh;
  std::unordered_set<std::string> in_batch;
  std::size_t at = 0;
  for (const auto n : cut(bytes.data(), bytes.size(), chunking_)) {
    const auto piece = bytes.substr(at, n);
    at += n;
    auto key = store::content_hash(piece.data(), piece.size()).hex();
    e.chunks.push_back({key, n});
    if (!tier_->has_chunk(key) && in_batch.insert(key).second) {
      fresh.push_back({std::move(key), piece});
    }
  }
  e.size += bytes.size();
  auto written = tier_->put_chunks(fresh);
  if (!written) {
    save.failed = written.error();
  } else {
    save.chunks_written += fresh.size();
    save.bytes_written += *written;
  }
  save.busy += clock::now() - start;
}

commit_result tier_writer::commit(const commit_header& header) {
  const auto start = clock::now();
  if (open_error_) return failure(*open_error_);
  pending_save save = std::move(pending_[header.id]);
  pending_.erase(header.id);
  if (save.failed) return failure(*save.failed);

  manifest m;
  m.id = header.id;
  m.step = header.step;
  m.created_unix_ms = header.created_unix_ms;
  m.metadata = header.metadata;
  m.chunks = chunking_;
  m.segment_bytes = config_.segment_bytes;
  commit_result out;
  for (std::size_t i = 0; i < header.entries.size(); ++i) {
    const auto& h = header.entries[i];
    manifest_entry e;
    e.name = h.name;
    e.type = static_cast<value_type>(h.type);
    e.attributes = h.attributes;
    e.size = h.size;
    if (h.is_inline) {
      e.is_inline = true;
      e.value = h.value;
      e.checksum = store::checksum(h.value.data(), h.value.size());
    } else {
      entry_state empty;
      auto& got = i < save.entries.size() ? save.entries[i] : empty;
      if (got.size != h.size) {
        // A writer restarted mid-save, or a piece was lost: never a manifest that lies.
        return failure(error(error_code::data_loss,
                             "checkpoint " + std::to_string(header.id) + ": the " + config_.kind +
                               " writer received " + std::to_string(got.size) + " of the " +
                               std::to_string(h.size) + " bytes of entry " + h.name));
      }
      e.checksum = got.sum->digest();
      e.chunks = std::move(got.chunks);
    }
    out.chunks += e.chunks.size();
    m.entries.push_back(std::move(e));
  }
  const std::string text = encode(m);
  if (auto ok = tier_->put_manifest(m.id, text); !ok) return failure(ok.error());
  out.durable_at_ns = monotonic_ns();
  known_manifest k;
  k.step = m.step;
  k.chunks.emplace();
  for (const auto& e : m.entries) {
    for (const auto& c : e.chunks) k.chunks->push_back(c.key);
  }
  known_[m.id] = std::move(k);
  out.chunks_written = save.chunks_written;
  out.manifest_bytes = text.size();
  out.bytes_written = save.bytes_written + text.size();
  if (auto ok = retain(out); !ok) return failure(ok.error());
  out.busy_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(save.busy +
                                                                     (clock::now() - start))
                  .count();
  out.node = this_node();
  return out;
}

void tier_writer::close() {
  tier_.reset();
  pending_.clear();
  if (!open_error_) {
    open_error_ = error(error_code::failed_precondition,
                        "the " + config_.kind + " tier's writer was closed");
  }
}

expected<void> tier_writer::retain(commit_result& out) {
  auto ids = tier_->manifest_ids();
  if (!ids) return ids.error();
  std::map<std::uint64_t, std::int64_t> steps;
  for (auto id : *ids) {
    auto it = known_.find(id);
    if (it == known_.end()) {
      // Written by an earlier writer: read it once.
      known_manifest k;
      auto text = tier_->get_manifest(id);
      if (text && *text) {
        if (auto m = decode(**text)) {
          k.step = m->step;
          k.chunks.emplace();
          for (const auto& e : m->entries) {
            for (const auto& c : e.chunks) k.chunks->push_back(c.key);
          }
        }
      }
      it = known_.emplace(id, std::move(k)).first;
    }
    steps[id] = it->second.step;
  }
  const auto keep = kept(steps, config_.keep_last, config_.keep_every_steps);
  const std::set<std::uint64_t> keep_set(keep.begin(), keep.end());
  std::vector<std::uint64_t> drop;
  for (auto id : *ids) {
    if (!keep_set.contains(id)) drop.push_back(id);
  }
  // The chunks a kept manifest or an unfinished save names stay. When a kept manifest does
  // not read back, what it names is unknown: no chunk is removed until it ages out.
  std::unordered_set<std::string> live;
  bool all_known = true;
  for (auto id : keep) {
    const auto& k = known_[id];
    if (!k.chunks) {
      all_known = false;
      break;
    }
    live.insert(k.chunks->begin(), k.chunks->end());
  }
  for (const auto& [id, save] : pending_) {
    for (const auto& e : save.entries) {
      for (const auto& c : e.chunks) live.insert(c.key);
    }
  }
  std::vector<std::string> dead;
  if (all_known) {
    for (auto& key : tier_->chunk_keys()) {
      if (!live.contains(key)) dead.push_back(std::move(key));
    }
  }
  if (auto ok = tier_->remove(drop, dead); !ok) return ok;
  for (auto id : drop) known_.erase(id);
  out.checkpoints_removed = drop.size();
  out.chunks_removed = dead.size();
  return {};
}

} // namespace celer::checkpoint::detail
