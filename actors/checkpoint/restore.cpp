// Reading checkpoints back: list() and restore(). Both open the tiers read-only (no lock),
// so they run beside a checkpointer's writers. Newest first; each manifest and chunk from
// the fast tier when its copy there is good, else from the archive; a checkpoint that
// cannot be read whole is skipped, saying why, for the next older one.
#include <celer/actors/checkpoint.hpp>

#include <celer/store/checksum.hpp>

#include <cstring>
#include <set>

#include "manifest.hpp"
#include "tier.hpp"

namespace celer::checkpoint {
namespace {

using clock = std::chrono::steady_clock;
using detail::manifest;
using detail::tier;

struct readers {
  std::vector<std::unique_ptr<tier>> tiers;  // fast first
  /// Tiers that exist but could not be opened, with why.
  std::vector<std::string> broken;
  std::string where;  // for messages: the directories
};

readers open_readers(const options& o) {
  readers r;
  auto add = [&](const std::string& kind, const std::string& dir) {
    if (dir.empty()) return;
    r.where += (r.where.empty() ? "" : " and ") + kind + " tier " + dir;
    auto t = kind == "fast" ? detail::open_fast_tier(dir, /*read_only=*/true)
                            : detail::open_archive_tier(dir, /*read_only=*/true);
    if (t) {
      r.tiers.push_back(std::move(*t));
    } else if (t.error().code() != error_code::not_found) {
      r.broken.push_back(kind + " tier " + dir + " cannot be read: " + t.error().message());
    }
  };
  add("fast", o.fast_dir);
  add("archive", o.archive_dir);
  return r;
}

std::string joined(const std::vector<std::string>& parts, const char* sep = "; ") {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

/// Every id any tier lists, with the tiers listing it; listing failures go to `broken`.
std::map<std::uint64_t, std::set<std::string>> all_ids(readers& r) {
  std::map<std::uint64_t, std::set<std::string>> ids;
  for (const auto& t : r.tiers) {
    auto listed = t->manifest_ids();
    if (!listed) {
      r.broken.push_back(std::string(t->kind()) + " tier: " + listed.error().message());
      continue;
    }
    for (auto id : *listed) ids[id].insert(std::string(t->kind()));
  }
  return ids;
}

/// The first copy of manifest `id` that reads back; `why` collects what was wrong with the
/// others (a tier without a copy says nothing unless no copy reads).
std::optional<manifest> read_manifest(const readers& r, std::uint64_t id,
                                      std::vector<std::string>& why, std::string& from) {
  for (const auto& t : r.tiers) {
    const std::string kind(t->kind());
    auto text = t->get_manifest(id);
    if (!text) {
      why.push_back(kind + ": " + text.error().message());
      continue;
    }
    if (!*text) continue;
    auto m = detail::decode(**text);
    if (!m) {
      why.push_back(kind + ": " + m.error().message());
      continue;
    }
    if (m->id != id) {
      why.push_back(kind + ": the manifest stored as " + std::to_string(id) + " says it is " +
                    std::to_string(m->id));
      continue;
    }
    from = kind;
    return std::move(*m);
  }
  return std::nullopt;
}

checkpoint_info info_of(const manifest& m, const std::set<std::string>& in) {
  checkpoint_info i;
  i.id = m.id;
  i.step = m.step;
  i.created = std::chrono::system_clock::time_point(std::chrono::milliseconds(m.created_unix_ms));
  i.logical_bytes = m.logical_bytes();
  i.metadata = m.metadata;
  i.in_fast = in.contains("fast");
  i.in_archive = in.contains("archive");
  return i;
}

/// Reads every entry of `m`, checking each chunk's hash and each entry's checksum. On
/// success fills `out` and `used` (the tiers chunks came from); else says why.
expected<void> read_entries(const readers& r, const manifest& m, snapshot& out,
                            std::set<std::string>& used, std::vector<std::string>& repaired) {
  for (const auto& e : m.entries) {
    entry got{e.name, e.type, e.attributes, {}};
    if (e.is_inline) {
      got.data = celer::bytes(std::string_view(e.value));
    } else {
      got.data = celer::bytes(static_cast<std::size_t>(e.size));
      std::size_t off = 0;
      for (const auto& c : e.chunks) {
        std::vector<std::string> bad;
        bool found = false;
        for (const auto& t : r.tiers) {
          const std::string kind(t->kind());
          auto bytes = t->get_chunk(c.key);
          if (!bytes) {
            bad.push_back(kind + ": " + bytes.error().message());
          } else if (!*bytes) {
            bad.push_back(kind + ": missing");
          } else if ((*bytes)->size() != c.size) {
            bad.push_back(kind + ": " + std::to_string((*bytes)->size()) + " bytes, not " +
                          std::to_string(c.size));
          } else if (store::content_hash((*bytes)->data(), c.size).hex() != c.key) {
            bad.push_back(kind + ": its bytes do not match its hash");
          } else {
            std::memcpy(got.data.data() + off, (*bytes)->data(), c.size);
            used.insert(kind);
            found = true;
            if (!bad.empty()) {
              repaired.push_back("chunk " + c.key + " of entry " + e.name + " (" + joined(bad) +
                                 "): read the " + kind + " copy");
            }
            break;
          }
        }
        if (!found) {
          return error(error_code::data_loss,
                       "chunk " + c.key + " of entry " + e.name + ": " + joined(bad));
        }
        off += c.size;
      }
    }
    const auto view = got.data.view();
    if (view.size() != e.size || store::checksum(view.data(), view.size()) != e.checksum) {
      return error(error_code::data_loss,
                   "entry " + e.name + ": its bytes do not match its checksum");
    }
    out.add(std::move(got));
  }
  return {};
}

} // namespace

expected<std::vector<checkpoint_info>> list(const options& opts) {
  if (opts.fast_dir.empty() && opts.archive_dir.empty()) {
    return error(error_code::invalid_argument, "checkpoint options name no tier");
  }
  auto r = open_readers(opts);
  std::vector<checkpoint_info> out;
  for (const auto& [id, in] : all_ids(r)) {
    std::vector<std::string> why;
    std::string from;
    if (auto m = read_manifest(r, id, why, from)) out.push_back(info_of(*m, in));
  }
  if (out.empty() && !r.broken.empty()) {
    return error(error_code::unavailable, joined(r.broken));
  }
  return out;
}

expected<restored> restore(const options& opts, const restore_options& which) {
  const auto start = clock::now();
  if (opts.fast_dir.empty() && opts.archive_dir.empty()) {
    return error(error_code::invalid_argument, "checkpoint options name no tier");
  }
  auto r = open_readers(opts);
  const auto ids = all_ids(r);
  restored out;
  for (const auto& b : r.broken) out.repaired.push_back(b + "; read the other tier");
  bool any = false;
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    const auto& [id, in] = *it;
    if (which.max_id && id > *which.max_id) continue;
    any = true;
    std::vector<std::string> why;
    std::string from;
    auto m = read_manifest(r, id, why, from);
    if (!m) {
      out.skipped.push_back({id, -1, "manifest: " + joined(why)});
      continue;
    }
    std::vector<std::string> repaired;
    if (!why.empty()) {
      repaired.push_back("manifest " + std::to_string(id) + " (" + joined(why) + "): read the " +
                         from + " copy");
    }
    snapshot s;
    s.set_step(m->step);
    for (const auto& [k, v] : m->metadata) s.set_metadata(k, v);
    std::set<std::string> used;
    if (auto ok = read_entries(r, *m, s, used, repaired); !ok) {
      out.skipped.push_back({id, m->step, ok.error().message()});
      continue;
    }
    if (used.empty()) used.insert(from);
    out.data = std::move(s);
    out.info = info_of(*m, in);
    out.source = used.contains("fast") && used.contains("archive") ? "fast+archive"
                                                                    : *used.begin();
    out.repaired.insert(out.repaired.end(), repaired.begin(), repaired.end());
    out.elapsed = clock::now() - start;
    return out;
  }
  if (!any) {
    std::string msg = "no checkpoint in the " + r.where;
    if (which.max_id) msg += " with an id of at most " + std::to_string(*which.max_id);
    if (!r.broken.empty()) msg += " (" + joined(r.broken) + ")";
    return error(error_code::not_found, msg);
  }
  std::string msg = "no checkpoint in the " + r.where + " reads back whole:";
  for (const auto& s : out.skipped) {
    msg += " checkpoint " + std::to_string(s.id) +
           (s.step >= 0 ? " (step " + std::to_string(s.step) + ")" : "") + ": " + s.why + ";";
  }
  return error(error_code::data_loss, msg);
}

} // namespace celer::checkpoint
