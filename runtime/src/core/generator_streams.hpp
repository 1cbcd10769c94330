#pragma once
// The streaming generators this process owns (celer::ref_stream, docs/api.md "Streaming
// generators"): the values each one's worker has sent (generator_item), in order, until
// its consumer takes them, and what the consumer has taken, told back to the worker
// (generator_ack) so that a generator with a window waits for it.
//
//   generator_streams streams(net, objects, job);
//   streams.open(spec);                          // before the task is sent
//   streams.on_item(m);                          // a generator_item arrived
//   auto ref = streams.next(task, end, timeout); // the consumer: the next value, or none
//   streams.close(task);                         // the consumer's handle is gone
//
// Each value is an object this process owns (reference_table), held by the stream until
// its consumer takes it. The generator's own return (`end`) is its count of values, or
// the error that ended it: next() waits for the next value or for that end, and meets the
// error at the position it happened. A retry's values the stream has already are dropped.
//
// Threads: the core's message thread calls on_item; user threads call next and close.
// mutex_ guards streams_; it is never held while waiting or sending. Lock order: this
// table's lock before the reference table's (it calls the table, never the reverse).

#include "core/reference_table.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/api.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace celer {

class generator_streams {
public:
  generator_streams(transport& net, reference_table& objects, job_id job);

  /// Stream `spec.id` (a generator: spec.generator != 0) begins; its values may arrive
  /// from now on.
  void open(const protocol::task_spec& spec);
  /// A value of one of this process's streams arrived: kept until taken, unless the stream
  /// has it already (a retry's) or is closed (then a stored copy is freed).
  void on_item(protocol::generator_item& m);
  /// The next value of stream `task`, whose return is `end`: a ref to it; `end` itself when
  /// the generator failed there (its get throws the error); nullopt once it ended. Waits up
  /// to `timeout` (get_timeout_error past it). invalid_argument for a stream not open here.
  std::optional<object_ref<void>> next(const task_id& task, const object_ref<void>& end, timeout_t timeout);
  /// The consumer's handle of stream `task` is gone: values not taken are freed, later ones
  /// too, and its generator no longer waits for a consumer.
  void close(const task_id& task);

  /// Streams open now (tests).
  [[nodiscard]] std::size_t open_streams() const;

private:
  struct stream {
    /// Values arrived and not taken yet, by index.
    std::map<std::uint64_t, object_ref<void>> arrived;
    /// The index of the next value the consumer takes.
    std::uint64_t next = 0;
    /// A pending handle to the next value while the consumer waits for it.
    object_ref<void> wanted;
    /// The values the generator made, once its end is read.
    std::optional<std::uint64_t> total;
    /// The worker running it (where acks go), and its window (task_spec::generator).
    address worker;
    std::int32_t window = -1;
    bool done = false;
  };
  /// Tells the worker of `s` how many values were taken (when it has a window).
  void ack(const task_id& task, const address& worker, std::uint64_t consumed);
  /// Ends the wait for the value `s.wanted` stands for, which will not come.
  void drop_wanted(stream& s, const std::string& why);

  transport& net_;
  reference_table& objects_;
  job_id job_;
  mutable std::mutex mutex_;
  std::unordered_map<task_id, stream> streams_;
};

} // namespace celer
