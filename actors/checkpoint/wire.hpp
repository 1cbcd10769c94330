#pragma once
// What the saver (checkpointer, or write()) and a tier's writer tell each other: msgpack
// values, because the writer is an actor. Bulk bytes never travel in these; they are
// objects in the node's store, passed to add_segment as arguments.
#include <celer/codec.hpp>
#include <celer/ids.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace celer::checkpoint::detail {

/// Which tier a writer keeps and how.
struct writer_config {
  std::string kind;  // "fast" or "archive"
  std::string dir;
  std::uint64_t keep_last = 0;
  std::int64_t keep_every_steps = 0;
  std::uint64_t min_bytes = 0;
  std::uint64_t avg_bytes = 0;
  std::uint64_t max_bytes = 0;
  std::uint64_t segment_bytes = 0;
  MSGPACK_DEFINE(kind, dir, keep_last, keep_every_steps, min_bytes, avg_bytes, max_bytes,
                 segment_bytes)
};

/// A writer's answer to "are you ready?": its tier opened (code 0) and its newest id.
struct probe_result {
  std::uint8_t code = 0;  // celer::error_code
  std::string message;
  std::uint64_t newest_id = 0;
  celer::node_id node;
  MSGPACK_DEFINE(code, message, newest_id, node)
};

/// One entry as the commit describes it; a bytes entry's bytes came before, by segments.
struct entry_header {
  std::string name;
  std::uint8_t type = 0;  // value_type
  std::map<std::string, std::string> attributes;
  std::uint64_t size = 0;
  bool is_inline = false;
  std::string value;  // when is_inline
  MSGPACK_DEFINE(name, type, attributes, size, is_inline, value)
};

struct commit_header {
  std::uint64_t id = 0;
  std::int64_t step = 0;
  std::int64_t created_unix_ms = 0;
  std::map<std::string, std::string> metadata;
  std::vector<entry_header> entries;
  /// When save() was called, on this node's monotonic clock (ns).
  std::int64_t save_started_ns = 0;
  MSGPACK_DEFINE(id, step, created_unix_ms, metadata, entries, save_started_ns)
};

struct commit_result {
  std::uint8_t code = 0;  // celer::error_code; 0 is ok
  std::string message;
  std::uint64_t chunks = 0;
  std::uint64_t chunks_written = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t manifest_bytes = 0;
  std::uint64_t checkpoints_removed = 0;
  std::uint64_t chunks_removed = 0;
  std::int64_t busy_ns = 0;
  std::int64_t durable_at_ns = 0;  // this node's monotonic clock
  celer::node_id node;
  MSGPACK_DEFINE(code, message, chunks, chunks_written, bytes_written, manifest_bytes,
                 checkpoints_removed, chunks_removed, busy_ns, durable_at_ns, node)
};

} // namespace celer::checkpoint::detail
