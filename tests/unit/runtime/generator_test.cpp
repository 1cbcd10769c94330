// Streaming generators (a remote function or actor method returning celer::generator<T>,
// consumed as a celer::ref_stream<T>). Through the public API embedded and (the suite's pass
// against a local cluster) on a cluster; the owner's table of streams (generator_streams)
// and the value ids directly. "[cluster-only]" cases kill a worker process.
#include "core/generator_streams.hpp"
#include "unit/runtime/core_pieces.hpp"
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace celer_test;
using Catch::Matchers::Contains;

namespace {

/// A directory of marker files, one per value a generator made, removed with it: what a
/// test sees of a generator's progress, whichever process runs it.
struct marker_dir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("celer-generator-test-" + std::to_string(std::random_device{}()));
  marker_dir() { std::filesystem::create_directories(path); }
  ~marker_dir() {
    // A generator of another process may still be writing into it (a cancelled one until
    // it sees its cancel): what remains after a few tries stays behind in /tmp.
    for (int i = 0; i < 5; ++i) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
      if (!ec) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  [[nodiscard]] std::size_t count() const {
    std::size_t n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(path, ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec)) {
      ++n;
    }
    return n;
  }
  /// Waits (up to 60 s, polling) until `n` values were made; false if they never were.
  [[nodiscard]] bool reaches(std::size_t n) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (count() < n) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
};

void mark(const std::string& dir, std::int64_t i) {
  std::ofstream(std::filesystem::path(dir) / ("value-" + std::to_string(i))) << i;
}

celer::generator<std::int64_t> count_to(std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) co_yield i * 10;
}
/// Values of `big` bytes and of 3 bytes, in turn: stored ones and inline ones in one stream.
celer::generator<std::vector<std::uint8_t>> mixed_sizes(std::int64_t n, std::int64_t big) {
  for (std::int64_t i = 0; i < n; ++i) {
    co_yield std::vector<std::uint8_t>(static_cast<std::size_t>(i % 2 == 0 ? big : 3), static_cast<std::uint8_t>(i));
  }
}
celer::generator<std::string> fails_after(std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) co_yield "value " + std::to_string(i);
  throw std::invalid_argument("ran out after " + std::to_string(n));
}
/// Leaves a marker for each value before it yields it.
celer::generator<std::int64_t> marked_values(std::string dir, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    mark(dir, i);
    co_yield i;
  }
}
/// Dies (its worker process) after `n_before_death` values of its first attempt.
celer::generator<std::int64_t> dies_once(std::int64_t n, std::int64_t n_before_death) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (i == n_before_death && celer::get_runtime_context().attempt == 1) std::_Exit(1);
    co_yield i;
  }
}
celer::generator<std::int64_t> yields_until_cancelled(std::string dir) {
  for (std::int64_t i = 0;; ++i) {
    mark(dir, i);
    co_yield i;
    if (celer::is_cancelled()) co_return;
  }
}
std::int64_t sum_of_refs(celer::object_ref<std::int64_t> a, celer::object_ref<std::int64_t> b) {
  return celer::get(a) + celer::get(b);
}

struct tokenizer {
  std::int64_t calls = 0;
  celer::generator<std::string> words(std::string text) {
    ++calls;
    std::string word;
    for (char c : text + " ") {
      if (c == ' ') {
        if (!word.empty()) co_yield std::to_string(calls) + ":" + word;
        word.clear();
      } else {
        word += c;
      }
    }
  }
  std::int64_t seen() const { return calls; }
};
tokenizer* make_tokenizer() { return new tokenizer; }

CELER_REMOTE(count_to, mixed_sizes, fails_after, marked_values, dies_once, yields_until_cancelled, sum_of_refs, make_tokenizer,
             &tokenizer::words, &tokenizer::seen);

bool on_a_cluster() { return std::getenv("CELER_ADDRESS") != nullptr; }

} // namespace

TEST_CASE("celer::generator runs locally as a range, and rethrows what its body threw", "[generator]") {
  std::vector<std::int64_t> got;
  for (auto v : count_to(4)) got.push_back(v);
  CHECK(got == std::vector<std::int64_t>{0, 10, 20, 30});
  auto g = fails_after(1);
  REQUIRE(g.next());
  CHECK(g.value() == "value 0");
  CHECK_THROWS_WITH(g.next(), Contains("ran out after 1"));
  CHECK_FALSE(g.next());
  auto none = count_to(0);
  CHECK(none.begin() == none.end());
}

TEST_CASE("a generator's values have ids of their own, past 65,535 values too", "[generator][protocol]") {
  using celer::protocol::task_spec;
  celer::task_ids ids;
  const auto t = ids.next();
  std::set<celer::object_id> seen{task_spec::return_id_of(t)};
  for (std::uint64_t i = 0; i < 200'000; ++i) {
    const auto id = task_spec::generator_item_id(t, i);
    REQUIRE(seen.insert(id).second);
    REQUIRE(!id.nil());
  }
  // The first values share the task's high word (its prefix), as its returns do.
  CHECK(task_spec::generator_item_id(t, 0).hi == t.hi);
  CHECK(task_spec::generator_item_id(t, 65'000).hi == t.hi);
}

TEST_CASE("a task generator's values arrive in order, one ref each, and its end counts them",
          "[api][generator]") {
  scoped_runtime rt;
  celer::ref_stream<std::int64_t> stream = celer::task(count_to).remote(std::int64_t{5});
  std::vector<std::int64_t> got;
  std::set<celer::object_id> ids;
  for (const auto& ref : stream) {
    got.push_back(celer::get(ref));
    ids.insert(ref.id());
  }
  CHECK(got == std::vector<std::int64_t>{0, 10, 20, 30, 40});
  CHECK(ids.size() == 5);
  CHECK(celer::get(stream.completed()) == 5);
  CHECK_FALSE(stream.next().has_value());  // ended: stays ended

  // A value is an object like any other: passed on by ref to another task.
  auto s2 = celer::task(count_to).remote(std::int64_t{2});
  auto a = s2.next();
  auto b = s2.next();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(celer::get(celer::task(sum_of_refs).remote(*a, *b)) == 10);

  auto empty = celer::task(count_to).remote(std::int64_t{0});
  CHECK_FALSE(empty.next().has_value());
  CHECK(celer::get(empty.completed()) == 0);
}

TEST_CASE("a stream mixes values kept in the object store with values carried inline",
          "[api][generator]") {
  scoped_runtime rt;
  const std::int64_t big = 300 * 1024;
  auto stream = celer::task(mixed_sizes).remote(std::int64_t{6}, big);
  std::int64_t i = 0;
  for (const auto& ref : stream) {
    auto v = celer::get(ref);
    CHECK(static_cast<std::int64_t>(v.size()) == (i % 2 == 0 ? big : 3));
    CHECK(v.front() == static_cast<std::uint8_t>(i));
    ++i;
  }
  CHECK(i == 6);
}

TEST_CASE("an exception in a generator reaches its consumer at the position it happened",
          "[api][generator]") {
  scoped_runtime rt;
  auto stream = celer::task(fails_after).remote(std::int64_t{3});
  for (int i = 0; i < 3; ++i) {
    auto ref = stream.next();
    REQUIRE(ref);
    CHECK(celer::get(*ref) == "value " + std::to_string(i));
  }
  auto failed = stream.next();
  REQUIRE(failed);
  try {
    (void)celer::get(*failed);
    FAIL("the ref after the last value should fail");
  } catch (const celer::task_error& e) {
    CHECK_THAT(e.what(), Contains("ran out after 3"));
    CHECK(e.exception_type() == "std::invalid_argument");
  }
  CHECK_FALSE(stream.next().has_value());
  CHECK_THROWS_AS(celer::get(stream.completed()), celer::task_error);
}

TEST_CASE("with back-pressure a generator makes at most N values its consumer has not taken",
          "[api][generator]") {
  scoped_runtime rt;
  marker_dir dir;
  const std::int64_t n = 12;
  const int window = 3;
  celer::task_options o;
  o.generator_backpressure = window;
  auto stream = celer::task(marked_values).options(o).remote(dir.path.string(), n);
  // It runs ahead of a consumer taking nothing, up to its window, and waits there.
  REQUIRE(dir.reaches(window));
  const std::vector<celer::object_ref<std::uint64_t>> end{stream.completed()};
  CHECK(celer::wait(end, 1, std::chrono::milliseconds(300)).ready.empty());
  CHECK(dir.count() == static_cast<std::size_t>(window));
  std::int64_t taken = 0;
  while (auto ref = stream.next()) {
    CHECK(celer::get(*ref) == taken);
    ++taken;
    // Each value taken lets it make one more, never more.
    CHECK(dir.count() <= static_cast<std::size_t>(taken + window));
  }
  CHECK(taken == n);
  CHECK(celer::get(stream.completed()) == n);

  // Options are checked: 0 values would never let it start.
  o.generator_backpressure = 0;
  CHECK_THROWS_WITH(celer::task(marked_values).options(o).remote(dir.path.string(), n),
                    Contains("generator_backpressure"));
}

TEST_CASE("dropping a stream frees its values and lets its generator run to its end",
          "[api][generator]") {
  scoped_runtime rt;
  marker_dir dir;
  celer::task_options o;
  o.generator_backpressure = 1;
  {
    auto stream = celer::task(marked_values).options(o).remote(dir.path.string(), std::int64_t{20});
    auto first = stream.next();
    REQUIRE(first);
    CHECK(celer::get(*first) == 0);
  }
  // Nobody takes the rest: it no longer waits for a consumer.
  CHECK(dir.reaches(20));
}

TEST_CASE("cancel stops a generator; what it made stays, and the ref after fails as cancelled",
          "[api][generator][cancel]") {
  scoped_runtime rt;
  marker_dir dir;
  celer::task_options o;
  o.generator_backpressure = 2;
  auto stream = celer::task(yields_until_cancelled).options(o).remote(dir.path.string());
  auto first = stream.next();
  REQUIRE(first);
  CHECK(celer::get(*first) == 0);
  CHECK(celer::cancel(stream));
  std::int64_t values = 1;
  bool cancelled = false;
  while (auto ref = stream.next()) {
    try {
      const auto v = celer::get(*ref);
      CHECK(v == values);
      ++values;
    } catch (const celer::task_cancelled_error&) {
      cancelled = true;
    }
  }
  CHECK(cancelled);
  CHECK(values <= 1 + 2 + 1);  // what it made while the cancel was on its way
}

TEST_CASE("an actor method can be a generator: each call streams, in call order", "[api][generator][actor]") {
  scoped_runtime rt;
  auto t = celer::actor(make_tokenizer).remote();
  auto first = t.task(&tokenizer::words).remote(std::string("to be or"));
  auto second = t.task(&tokenizer::words).options({.generator_backpressure = 1}).remote(std::string("not"));
  std::vector<std::string> got;
  for (const auto& ref : first) got.push_back(celer::get(ref));
  for (const auto& ref : second) got.push_back(celer::get(ref));
  CHECK(got == std::vector<std::string>{"1:to", "1:be", "1:or", "2:not"});
  CHECK(celer::get(t.task(&tokenizer::seen).remote()) == 2);
}

TEST_CASE("a generator whose worker dies is run again, and its consumer sees each value once",
          "[api][generator][fault][cluster-only]") {
  if (!on_a_cluster()) return;
  scoped_runtime rt;
  celer::task_options o;
  o.max_retries = 1;
  auto stream = celer::task(dies_once).options(o).remote(std::int64_t{8}, std::int64_t{5});
  std::vector<std::int64_t> got;
  for (const auto& ref : stream) got.push_back(celer::get(ref));
  CHECK(got == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(celer::get(stream.completed()) == 8);
}

// ------------------------------------------------------------------ the owner's table

namespace {

struct streams_fixture : celer::testing::core_pieces {
  celer::generator_streams streams{net, objects, job};
  celer::address worker{celer::unique_id::random(), {}};

  celer::protocol::generator_item item(const celer::protocol::task_spec& spec, std::uint64_t index,
                                       std::int64_t value) {
    celer::protocol::generator_item m;
    m.task = spec.id;
    m.index = index;
    m.value.ok = true;
    m.value.payload = celer::detail::pack(value);
    m.worker = worker;
    return m;
  }
  celer::protocol::task_result end(const celer::protocol::task_spec& spec, std::uint64_t count) {
    return result(spec.id, celer::detail::pack(count));
  }
  std::int64_t read(const celer::object_ref<void>& ref) {
    auto v = value_of(ref);
    REQUIRE(v.ok);
    return celer::detail::unpack<std::int64_t>(v.bytes(), "value");
  }
};

} // namespace

TEST_CASE("the owner hands a stream's values out in order, acks each, and ends at the count",
          "[core][generator]") {
  streams_fixture f;
  auto spec = f.task("g");
  spec.generator = 2;
  auto end = f.objects.submit(spec, {});
  f.streams.open(spec);
  // Values may arrive out of order (not from one worker; a test says so): kept by index.
  auto one = f.item(spec, 1, 11);
  f.streams.on_item(one);
  auto zero = f.item(spec, 0, 10);
  f.streams.on_item(zero);
  const std::chrono::nanoseconds now(0);
  auto a = f.streams.next(spec.id, end, now);
  REQUIRE(a);
  CHECK(a->id() == celer::protocol::task_spec::generator_item_id(spec.id, 0));
  CHECK(f.read(*a) == 10);
  auto acks = f.net.take<celer::protocol::generator_ack>();
  REQUIRE(acks.size() == 1);
  CHECK(acks[0].first == f.worker);
  CHECK(acks[0].second.consumed == 1);
  auto b = f.streams.next(spec.id, end, now);
  REQUIRE(b);
  CHECK(f.read(*b) == 11);
  // Nothing more yet: a look that does not wait times out.
  CHECK_THROWS_AS(f.streams.next(spec.id, end, now), celer::get_timeout_error);
  // A value again (a retry's): dropped, and its worker told how far the consumer is.
  auto again = f.item(spec, 0, 99);
  f.streams.on_item(again);
  acks = f.net.take<celer::protocol::generator_ack>();
  REQUIRE_FALSE(acks.empty());
  CHECK(acks.back().second.consumed == 2);
  // The end says 2: the stream is over.
  auto r = f.end(spec, 2);
  f.objects.finish_task(spec.id, r.returns);
  CHECK_FALSE(f.streams.next(spec.id, end, now).has_value());
  a.reset();
  b.reset();
  end = {};
  f.streams.close(spec.id);
  CHECK(f.objects.owned_objects() == 0);
  CHECK(f.streams.open_streams() == 0);
}

TEST_CASE("the owner ignores another job's values, frees what a closed stream is sent, and meets "
          "a failure at its position", "[core][generator][security]") {
  streams_fixture f;
  auto spec = f.task("g");
  spec.generator = -1;
  auto end = f.objects.submit(spec, {});
  f.streams.open(spec);
  auto forged = f.item(spec, 0, 666);
  forged.sender_job = celer::job_id::random();
  f.streams.on_item(forged);
  const std::chrono::nanoseconds now(0);
  CHECK_THROWS_AS(f.streams.next(spec.id, end, now), celer::get_timeout_error);
  auto real = f.item(spec, 0, 1);
  real.sender_job = f.job;
  f.streams.on_item(real);
  auto a = f.streams.next(spec.id, end, now);
  REQUIRE(a);
  CHECK(f.read(*a) == 1);
  CHECK(f.net.take<celer::protocol::generator_ack>().empty());  // no window: no acks
  // It failed after its first value: the consumer meets the error next, then the end.
  auto r = celer::testing::core_pieces::failed(spec.id, celer::detail::failure_kind::task_error, "boom");
  f.objects.finish_task(spec.id, r.returns);
  auto failed = f.streams.next(spec.id, end, now);
  REQUIRE(failed);
  CHECK(failed->id() == end.id());
  CHECK(f.value_of(*failed).fail.message == "boom");
  CHECK_FALSE(f.streams.next(spec.id, end, now).has_value());
  f.streams.close(spec.id);
  CHECK_THROWS_WITH(f.streams.next(spec.id, end, now), Contains("not open"));

  // A closed stream's late value: a stored copy is freed on its node, and its worker need
  // not wait for a consumer.
  auto late = f.item(spec, 5, 0);
  late.value.stored = true;
  late.value.node_addr = f.node;
  f.streams.on_item(late);
  auto frees = f.net.take<celer::protocol::store_free>();
  REQUIRE(frees.size() == 1);
  CHECK(frees[0].first == f.node);
  auto acks = f.net.take<celer::protocol::generator_ack>();
  REQUIRE(acks.size() == 1);
  CHECK(acks[0].second.consumed == std::numeric_limits<std::uint64_t>::max());
}
