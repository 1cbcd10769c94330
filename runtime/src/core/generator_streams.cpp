#include "core/generator_streams.hpp"

#include "log.hpp"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace celer {

generator_streams::generator_streams(transport& net, reference_table& objects, job_id job)
  : net_(net), objects_(objects), job_(job) {}

void generator_streams::open(const protocol::task_spec& spec) {
  std::lock_guard lock(mutex_);
  auto& s = streams_[spec.id];
  s.window = spec.generator;
}

void generator_streams::on_item(protocol::generator_item& m) {
  if (!m.sender_job.nil() && m.sender_job != job_) {
    CELER_LOG(warn, "core", "ignored a generator_item from job " + m.sender_job.short_hex() +
                              ", which does not own its stream");
    return;
  }
  // The value's id is the stream's and the index's, whatever the message says.
  m.value.id = protocol::task_spec::generator_item_id(m.task, m.index);
  std::unique_lock lock(mutex_);
  auto it = streams_.find(m.task);
  if (it == streams_.end()) {
    // Closed (or never ours): nobody will read it. Filling an unknown object frees its
    // stored copy; its generator need not wait for a consumer.
    lock.unlock();
    objects_.fill(std::move(m.value));
    ack(m.task, m.worker, std::numeric_limits<std::uint64_t>::max());
    return;
  }
  auto& s = it->second;
  s.worker = m.worker;
  if (m.index < s.next || s.arrived.contains(m.index) || (s.total && m.index >= *s.total)) {
    // A retry's value the stream has (or had) already: the first copy stands (a stored
    // duplicate is freed), and the retry's worker learns how far the consumer is.
    const auto consumed = s.next;
    const auto window = s.window;
    lock.unlock();
    objects_.fill(std::move(m.value));
    if (window > 0) ack(m.task, m.worker, consumed);
    return;
  }
  const object_id id = m.value.id;
  if (s.wanted.valid() && s.wanted.id() == id) {
    s.arrived.emplace(m.index, std::exchange(s.wanted, {}));
  } else {
    s.arrived.emplace(m.index, objects_.expect(id));
  }
  objects_.fill(std::move(m.value));
}

std::optional<object_ref<void>> generator_streams::next(const task_id& task, const object_ref<void>& end,
                                                        timeout_t timeout) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto left = [&]() -> timeout_t {
    if (!timeout) return std::nullopt;
    return std::max(std::chrono::nanoseconds(0),
                    *timeout - std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - start));
  };
  for (;;) {
    object_ref<void> wanted;
    {
      std::unique_lock lock(mutex_);
      auto it = streams_.find(task);
      if (it == streams_.end()) {
        throw exception(error_code::invalid_argument, "this stream is not open in this process");
      }
      auto& s = it->second;
      if (s.done) return std::nullopt;
      if (auto a = s.arrived.find(s.next); a != s.arrived.end()) {
        auto ref = std::move(a->second);
        s.arrived.erase(a);
        ++s.next;
        const auto consumed = s.next;
        const auto window = s.window;
        const auto worker = s.worker;
        lock.unlock();
        if (window > 0) ack(task, worker, consumed);
        return ref;
      }
      if (s.total) {
        if (s.next >= *s.total) {
          s.done = true;
          drop_wanted(s, "its generator ended before it");
          return std::nullopt;
        }
        // The generator made it, yet it never arrived: the process that made it died
        // after keeping it and before sending it (its retry found it kept, and skipped it).
        if (!s.wanted.valid()) {
          s.wanted = objects_.expect(protocol::task_spec::generator_item_id(task, s.next));
        }
        auto lost = std::exchange(s.wanted, {});
        protocol::object_payload v;
        v.id = lost.id();
        v.fail = protocol::failure_info::make(
          detail::failure_kind::object_lost, error_code::data_loss,
          "value " + std::to_string(s.next) + " of this stream was lost: the worker that made it died "
                                              "before sending it");
        objects_.fill(std::move(v));
        ++s.next;
        return lost;
      }
      if (!s.wanted.valid()) s.wanted = objects_.expect(protocol::task_spec::generator_item_id(task, s.next));
      wanted = s.wanted;
    }
    auto ready = objects_.wait_ready({wanted, end}, 1, left());
    if (ready.empty()) {
      throw get_timeout_error("celer::ref_stream::next timed out after " +
                              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*timeout).count()) +
                              " ms: its generator has not made the next value yet");
    }
    if (std::find(ready.begin(), ready.end(), std::size_t{0}) != ready.end()) continue;  // arrived
    // The generator ended: with its count (values sent before its end are here), or with
    // the error that ended it, met here, at the position it happened.
    auto got = objects_.fetch({end}, std::chrono::nanoseconds(0));
    std::lock_guard lock(mutex_);
    auto it = streams_.find(task);
    if (it == streams_.end()) return std::nullopt;
    auto& s = it->second;
    if (!got.at(0).ok) {
      s.done = true;
      drop_wanted(s, "its generator failed before it");
      return end;
    }
    try {
      s.total = detail::unpack<std::uint64_t>(got[0].bytes(), "the count of a stream's values");
    } catch (const exception&) {
      s.done = true;
      drop_wanted(s, "its generator's end could not be read");
      return end;
    }
  }
}

void generator_streams::close(const task_id& task) {
  stream gone;
  {
    std::lock_guard lock(mutex_);
    auto it = streams_.find(task);
    if (it == streams_.end()) return;
    gone = std::move(it->second);
    streams_.erase(it);
    drop_wanted(gone, "its stream was dropped");
  }
  // Values not taken are freed as `gone` goes; a generator still running stops waiting.
  if (gone.window > 0 && !gone.done && !gone.worker.nil()) {
    ack(task, gone.worker, std::numeric_limits<std::uint64_t>::max());
  }
}

std::size_t generator_streams::open_streams() const {
  std::lock_guard lock(mutex_);
  return streams_.size();
}

void generator_streams::ack(const task_id& task, const address& worker, std::uint64_t consumed) {
  if (worker.nil()) return;
  (void)net_.send(worker, protocol::generator_ack{task, consumed, {}});
}

void generator_streams::drop_wanted(stream& s, const std::string& why) {
  if (!s.wanted.valid()) return;
  // Filled, so that it is freed when its handle goes (an unfilled object waits for its
  // value and is never freed).
  protocol::object_payload v;
  v.id = s.wanted.id();
  v.fail = protocol::failure_info::make(detail::failure_kind::object_lost, error_code::not_found,
                                        "value " + std::to_string(s.next) + " of this stream never came: " + why);
  objects_.fill(std::move(v));
  s.wanted = {};
}

} // namespace celer
