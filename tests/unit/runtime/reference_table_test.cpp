// A core's objects: refcounts, fills, the answers to borrowers, waits. The blocking cases
// start a thread and fill once it is blocked (the table counts blocked threads), never
// after a sleep.
#include "config/knobs.hpp"
#include "core/reference_table.hpp"
#include "unit/runtime/core_pieces.hpp"

#include <catch2/catch.hpp>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

using namespace celer;

namespace {

protocol::object_payload value(const object_id& id, std::string payload) {
  protocol::object_payload v;
  v.id = id;
  v.ok = true;
  v.payload = std::move(payload);
  return v;
}

} // namespace

TEST_CASE("a put object lives while a handle holds it", "[core][reference_table]") {
  testing::core_pieces f;
  const object_id id(unique_id{f.ids.next().hi, 1});
  auto ref = f.objects.put(value(id, "v"));
  CHECK(f.objects.owned_objects() == 1);
  CHECK(f.value_of(ref).payload == "v");
  auto copy = ref;
  ref = {};
  CHECK(f.objects.owned_objects() == 1);
  copy = {};
  CHECK(f.objects.owned_objects() == 0);
}

TEST_CASE("an object that escaped is kept after its handles are gone", "[core][reference_table]") {
  testing::core_pieces f;
  auto ref = f.objects.put(value(object_id::random(), "v"));
  f.objects.escaped(ref.id());
  ref = {};
  CHECK(f.objects.owned_objects() == 1);
}

TEST_CASE("a ready owned argument travels inline; a pending one is held by the task",
          "[core][reference_table]") {
  testing::core_pieces f;
  auto ready = f.objects.put(value(object_id::random(), "r"));
  auto producer = f.task("p");
  auto pending = f.objects.submit(producer, {});
  auto consumer = f.task("c");
  auto out = f.objects.submit(consumer, {testing::core_pieces::by_ref(ready),
                                         testing::core_pieces::by_ref(pending)});
  REQUIRE(consumer.args.size() == 2);
  CHECK_FALSE(consumer.args[0].is_ref);
  CHECK(consumer.args[0].value == "r");
  CHECK(consumer.args[1].is_ref);
  CHECK(f.objects.tasks_holding_args() == 1);

  // Released once, however many times the task is finished or failed.
  std::vector<protocol::object_payload> returns{value(consumer.return_id(), "c")};
  f.objects.finish_task(consumer.id, returns);
  f.objects.fail_task(consumer.id, protocol::failure_info::make(detail::failure_kind::task_error,
                                                                 error_code::internal, "late"));
  CHECK(f.objects.tasks_holding_args() == 0);
  CHECK(f.value_of(out).ok);  // the first outcome stands
  CHECK(f.value_of(out).payload == "c");
}

TEST_CASE("a fill is stored once: a later value for the same object is ignored",
          "[core][reference_table]") {
  testing::core_pieces f;
  auto spec = f.task("f");
  auto ref = f.objects.submit(spec, {});
  f.objects.fill(value(spec.return_id(), "first"));
  f.objects.fill(value(spec.return_id(), "second"));
  CHECK(f.value_of(ref).payload == "first");
}

TEST_CASE("a borrower asking for a pending object is answered when it is filled",
          "[core][reference_table]") {
  testing::core_pieces f;
  auto spec = f.task("f");
  auto ref = f.objects.submit(spec, {});
  const address borrower{unique_id::random(), {}};
  f.objects.on_get_object({ref.id(), borrower});
  CHECK(f.net.take<protocol::object_reply>().empty());
  f.objects.fill(value(spec.return_id(), "v"));
  const auto replies = f.net.take<protocol::object_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].first == borrower);
  CHECK(replies[0].second.object.payload == "v");
  // An object it does not know is answered with not_found.
  f.objects.on_get_object({object_id::random(), borrower});
  const auto unknown = f.net.take<protocol::object_reply>();
  REQUIRE(unknown.size() == 1);
  CHECK(unknown[0].second.object.fail.code == error_code::not_found);
}

TEST_CASE("get asks a borrowed object's owner once, and times out while it is missing",
          "[core][reference_table]") {
  testing::core_pieces f;
  const address owner{unique_id::random(), {}};
  const object_ref<void> ref(object_id::random(), owner);
  CHECK_THROWS_AS(f.objects.fetch({ref}, std::chrono::nanoseconds(0)), get_timeout_error);
  CHECK_THROWS_AS(f.objects.fetch({ref}, std::chrono::nanoseconds(0)), get_timeout_error);
  const auto asked = f.net.take<protocol::get_object>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first == owner);
  f.objects.fill(value(ref.id(), "b"));
  CHECK(f.value_of(ref).payload == "b");
  CHECK(f.objects.wait_ready({ref}, 1, std::chrono::nanoseconds(0)) == std::vector<std::size_t>{0});
}

TEST_CASE("after stop every get fails with the stop's reason", "[core][reference_table]") {
  testing::core_pieces f;
  auto ref = f.objects.put(value(object_id::random(), "v"));
  f.objects.stop("the cluster is gone", error_code::unavailable);
  try {
    (void)f.objects.fetch({ref}, std::nullopt);
    FAIL("fetch after stop returned");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::unavailable);
  }
  ref = {};  // a handle outliving the stop reaches nothing
}

// A thread blocked in get or wait is woken once, by the fill that completes what it waits
// for, and leaves nothing of itself on the objects it did not need.
namespace {

/// Runs `f` on a thread and returns once that thread is blocked in the table.
template <class F>
std::thread blocked_in(reference_table& objects, std::size_t threads_before, F f) {
  std::thread t(std::move(f));
  while (objects.blocked() == threads_before) std::this_thread::yield();
  return t;
}

} // namespace

TEST_CASE("a get blocked on two objects wakes when the second fills", "[core][reference_table]") {
  testing::core_pieces f;
  auto a_spec = f.task("a");
  auto b_spec = f.task("b");
  auto a = f.objects.submit(a_spec, {});
  auto b = f.objects.submit(b_spec, {});
  std::vector<detail::fetched> got;
  auto t = blocked_in(f.objects, 0, [&] { got = f.objects.fetch({a, b, a}, std::nullopt); });
  f.objects.fill(value(a_spec.return_id(), "x"));
  CHECK(f.objects.blocked() == 1);  // still missing b
  f.objects.fill(value(b_spec.return_id(), "y"));
  t.join();
  REQUIRE(got.size() == 3);
  CHECK(got[0].payload == "x");
  CHECK(got[1].payload == "y");
  CHECK(got[2].payload == "x");
}

TEST_CASE("a wait for one of two leaves no waiter on the other", "[core][reference_table]") {
  testing::core_pieces f;
  auto a_spec = f.task("a");
  auto b_spec = f.task("b");
  auto a = f.objects.submit(a_spec, {});
  auto b = f.objects.submit(b_spec, {});
  std::vector<std::size_t> ready;
  auto t = blocked_in(f.objects, 0, [&] { ready = f.objects.wait_ready({a, b}, 1, std::nullopt); });
  f.objects.fill(value(b_spec.return_id(), "y"));
  t.join();
  CHECK(ready == std::vector<std::size_t>{1});
  // The waiter's frame is gone: filling a must not reach it (ASan would see it).
  f.objects.fill(value(a_spec.return_id(), "x"));
  CHECK(f.value_of(a).payload == "x");
}

TEST_CASE("a wait already answered returns every ready ref at once; one not yet answered "
          "blocks until enough are",
          "[core][reference_table]") {
  testing::core_pieces f;
  std::vector<protocol::task_spec> specs;
  std::vector<object_ref<void>> refs;
  for (const char* name : {"a", "b", "c", "d"}) {
    specs.push_back(f.task(name));
    refs.push_back(f.objects.submit(specs.back(), {}));
  }
  f.objects.fill(value(specs[1].return_id(), "b"));
  f.objects.fill(value(specs[3].return_id(), "d"));
  // Two ready, one asked for: both are the answer, with no wait.
  CHECK(f.objects.wait_ready(refs, 1, std::chrono::nanoseconds(0)) == std::vector<std::size_t>{1, 3});
  CHECK(f.objects.wait_ready(refs, 2, std::chrono::nanoseconds(0)) == std::vector<std::size_t>{1, 3});
  // Three asked for: it blocks until a third is filled.
  std::vector<std::size_t> ready;
  auto t = blocked_in(f.objects, 0, [&] { ready = f.objects.wait_ready(refs, 3, std::nullopt); });
  f.objects.fill(value(specs[0].return_id(), "a"));
  t.join();
  CHECK(ready == std::vector<std::size_t>{0, 1, 3});
  CHECK(f.objects.blocked() == 0);
}

TEST_CASE("a get that timed out leaves no waiter behind", "[core][reference_table]") {
  testing::core_pieces f;
  auto spec = f.task("a");
  auto a = f.objects.submit(spec, {});
  CHECK_THROWS_AS(f.objects.fetch({a}, std::chrono::milliseconds(1)), get_timeout_error);
  CHECK(f.objects.blocked() == 0);
  f.objects.fill(value(spec.return_id(), "x"));
  CHECK(f.value_of(a).payload == "x");
}

TEST_CASE("two threads blocked on one object both wake", "[core][reference_table]") {
  testing::core_pieces f;
  auto spec = f.task("a");
  auto a = f.objects.submit(spec, {});
  std::vector<detail::fetched> first, second;
  auto t1 = blocked_in(f.objects, 0, [&] { first = f.objects.fetch({a}, std::nullopt); });
  auto t2 = blocked_in(f.objects, 1, [&] { second = f.objects.fetch({a}, std::nullopt); });
  f.objects.fill(value(spec.return_id(), "x"));
  t1.join();
  t2.join();
  REQUIRE(first.size() == 1);
  REQUIRE(second.size() == 1);
  CHECK(first[0].payload == "x");
  CHECK(second[0].payload == "x");
}

TEST_CASE("stop wakes a blocked get with the stop's error", "[core][reference_table]") {
  testing::core_pieces f;
  auto spec = f.task("a");
  auto a = f.objects.submit(spec, {});
  std::optional<error_code> code;
  auto t = blocked_in(f.objects, 0, [&] {
    try {
      (void)f.objects.fetch({a}, std::nullopt);
    } catch (const exception& e) {
      code = e.code();
    }
  });
  f.objects.stop("the cluster is gone", error_code::unavailable);
  t.join();
  CHECK(code == error_code::unavailable);
}

// A driver's get receives its own reply when the transport lends it the seat
// (reference_table::receiver_seat); here the seat is played by the test.
TEST_CASE("a get lent the receiver's seat fills from what its own thread receives",
          "[core][reference_table]") {
  testing::core_pieces f;
  auto spec = f.task("a");
  auto a = f.objects.submit(spec, {});
  std::thread::id received_on;
  int wakes = 0;
  f.objects.receive_while_waiting(
    {.receive_until = [&](const std::function<bool()>& done, std::chrono::steady_clock::time_point) {
       received_on = std::this_thread::get_id();
       f.objects.fill(value(spec.return_id(), "x"));  // the reply, handled on this thread
       return done();
     },
     .wake = [&] { ++wakes; }});
  auto got = f.objects.fetch({a}, std::nullopt);
  REQUIRE(got.size() == 1);
  CHECK(got[0].payload == "x");
  CHECK(received_on == std::this_thread::get_id());
  CHECK(wakes == 0);  // filled on the receiving thread itself: nothing to wake
  CHECK(f.objects.blocked() == 0);
  // A look that hardly waits (a zero timeout, polled in a loop) is not worth the seat.
  auto b_spec = f.task("b");
  auto b = f.objects.submit(b_spec, {});
  received_on = {};
  CHECK(f.objects.wait_ready({b}, 1, std::chrono::nanoseconds(0)).empty());
  CHECK(received_on == std::thread::id{});
}

TEST_CASE("a receiving get is woken through the seat by a fill on another thread; one refused "
          "the seat waits as before", "[core][reference_table]") {
  testing::core_pieces f;
  auto a_spec = f.task("a");
  auto b_spec = f.task("b");
  auto a = f.objects.submit(a_spec, {});
  auto b = f.objects.submit(b_spec, {});
  std::mutex m;
  std::condition_variable cv;
  bool receiving = false, woken = false, lend = true;
  f.objects.receive_while_waiting(
    {.receive_until = [&](const std::function<bool()>& done, std::chrono::steady_clock::time_point) {
       std::unique_lock lock(m);
       if (!lend) return false;
       receiving = true;
       cv.notify_all();
       cv.wait(lock, [&] { return woken; });
       lock.unlock();  // done() takes the table's lock, which wake() is called under
       return done();
     },
     .wake = [&] {
       std::lock_guard lock(m);
       woken = true;
       cv.notify_all();
     }});
  std::vector<detail::fetched> got;
  std::thread t([&] { got = f.objects.fetch({a}, std::nullopt); });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return receiving; });
    lend = false;
  }
  f.objects.fill(value(a_spec.return_id(), "x"));  // on this thread: the seat's wake
  t.join();
  REQUIRE(got.size() == 1);
  CHECK(got[0].payload == "x");
  // Refused the seat: blocked as before, woken by the fill.
  auto t2 = blocked_in(f.objects, 0, [&] { got = f.objects.fetch({b}, std::nullopt); });
  f.objects.fill(value(b_spec.return_id(), "y"));
  t2.join();
  CHECK(got[0].payload == "y");
}

// Lineage: how a stored task output is made again when its node dies, and what a lost
// object says about its origin.
namespace {

struct lineage_fixture : testing::core_pieces {
  node_id dead = node_id::random();
  std::vector<reference_table::rebuild> rebuilt;
  lineage_fixture() {
    objects.set_rebuilder([this](std::vector<reference_table::rebuild> r) {
      for (auto& x : r) rebuilt.push_back(std::move(x));
    });
  }
  /// A stored value of `id` on node `on`.
  static protocol::object_payload stored(const object_id& id, const node_id& on) {
    protocol::object_payload v;
    v.id = id;
    v.ok = true;
    v.stored = true;
    v.node = on;
    v.node_addr = address{unique_id::random(), "inproc://node"};
    v.size = 1 << 20;
    return v;
  }
  /// Submits task `function` (taking `args`) and finishes it with a stored output on `on`,
  /// offering its spec as lineage with `retries` left. Returns the handle to the output.
  object_ref<void> made_on(const node_id& on, const std::string& function,
                           std::vector<detail::arg_spec> args = {}, std::int32_t retries = 3) {
    auto spec = task(function);
    auto ref = objects.submit(spec, std::move(args));
    reference_table::made_by made;
    made.function = function;
    made.spec = spec;
    made.retries_left = retries;
    std::vector<protocol::object_payload> returns{stored(spec.return_id(), on)};
    objects.finish_task(spec.id, returns, std::move(made));
    return ref;
  }
  /// The failure a get of `ref` reports now (it must have one).
  detail::failure failure_of(const object_ref<void>& ref) {
    auto got = objects.fetch({ref}, std::chrono::nanoseconds(0));
    REQUIRE(got.size() == 1);
    REQUIRE_FALSE(got[0].ok);
    return got[0].fail;
  }
};

} // namespace

TEST_CASE("a stored task output keeps its lineage, and its task's arguments, while it is held",
          "[core][reference_table][lineage]") {
  lineage_fixture f;
  auto input_spec = f.task("input");
  auto input = f.objects.submit(input_spec, {});  // pending: passed by ref
  auto out = f.made_on(f.dead, "produce", {testing::core_pieces::by_ref(input)});
  CHECK(f.objects.lineages() == 1);
  CHECK(f.objects.lineage_bytes() > 0);
  CHECK(f.objects.tasks_holding_args() == 1);  // the input is kept for a rerun
  out = {};
  CHECK(f.objects.lineages() == 0);
  CHECK(f.objects.lineage_bytes() == 0);
  CHECK(f.objects.tasks_holding_args() == 0);
}

TEST_CASE("a held output whose node died is made again by running its task",
          "[core][reference_table][lineage]") {
  lineage_fixture f;
  auto out = f.made_on(f.dead, "produce");
  auto elsewhere = f.made_on(node_id::random(), "other");
  f.objects.on_node_died(f.dead, "no heartbeat");
  REQUIRE(f.rebuilt.size() == 1);
  CHECK(f.rebuilt[0].spec.function == "produce");
  CHECK(f.rebuilt[0].retries_left == 3);
  CHECK(f.rebuilt[0].why.find("no heartbeat") != std::string::npos);
  CHECK_FALSE(f.objects.ready(out.id()));  // a get waits for the new run
  CHECK(f.objects.ready(elsewhere.id()));
  CHECK(f.objects.rebuilt() == 1);
  // The new run's result fills it again.
  std::vector<protocol::object_payload> returns{
    lineage_fixture::stored(out.id(), node_id::random())};
  f.objects.finish_task(f.rebuilt[0].spec.id, returns,
                        {"produce", false, f.rebuilt[0].spec, 2, false, {}});
  CHECK(f.objects.wait_ready({out}, 1, std::chrono::nanoseconds(0)) ==
        std::vector<std::size_t>{0});
  CHECK(f.objects.lineages() == 2);
}

TEST_CASE("an output whose task has no retries is lost with its node, and says so",
          "[core][reference_table][lineage]") {
  lineage_fixture f;
  auto out = f.made_on(f.dead, "produce", {}, /*retries=*/0);
  CHECK(f.objects.lineages() == 0);
  f.objects.on_node_died(f.dead, "no heartbeat");
  CHECK(f.rebuilt.empty());
  const auto fail = f.failure_of(out);
  CHECK(fail.kind == detail::failure_kind::object_lost);
  CHECK(fail.code == error_code::data_loss);
  CHECK(fail.function == "produce");
  CHECK(fail.node == f.dead.short_hex());
  CHECK(fail.message.find("output of task produce") != std::string::npos);
  CHECK(fail.message.find("max_retries") != std::string::npos);
  try {
    detail::throw_failure(fail);
  } catch (const object_lost_error& e) {
    CHECK(e.origin() == "produce");
    CHECK(e.node() == f.dead.short_hex());
  }
}

TEST_CASE("a stored put is lost with its node and named a put; a durable one is not",
          "[core][reference_table][lineage]") {
  lineage_fixture f;
  auto put = f.objects.put(lineage_fixture::stored(object_id::random(), f.dead));
  auto durable = f.objects.put(lineage_fixture::stored(object_id::random(), f.dead), true);
  f.objects.on_node_died(f.dead, "killed");
  const auto fail = f.failure_of(put);
  CHECK(fail.function == "celer::put");
  CHECK(fail.message.find("put by this process") != std::string::npos);
  CHECK(fail.message.find("durable=true") != std::string::npos);
  // The durable one still points at its node: a read asks the head's directory.
  CHECK(f.objects.ready(durable.id()));
  CHECK(f.objects.locality_of([&] {
    protocol::task_spec s;
    s.args.push_back({true, durable.id(), f.self, {}});
    return s;
  }()).size() == 1);
}

TEST_CASE("an output kept only as a lineage's argument is made again when a task asks for it",
          "[core][reference_table][lineage]") {
  lineage_fixture f;
  auto first = f.made_on(f.dead, "first");
  auto second = f.made_on(f.dead, "second", {testing::core_pieces::by_ref(first)});
  const object_id first_id = first.id();
  first = {};  // kept: second's lineage takes it
  CHECK(f.objects.lineages() == 2);
  f.objects.on_node_died(f.dead, "killed");
  // Second is held: made again now. First is not made again until second's run asks.
  REQUIRE(f.rebuilt.size() == 1);
  CHECK(f.rebuilt[0].spec.function == "second");
  const address worker{unique_id::random(), "inproc://worker"};
  f.objects.on_get_object({first_id, worker});
  REQUIRE(f.rebuilt.size() == 2);
  CHECK(f.rebuilt[1].spec.function == "first");
  CHECK(f.net.take<protocol::object_reply>().empty());  // answered once it is made
  std::vector<protocol::object_payload> returns{
    lineage_fixture::stored(first_id, node_id::random())};
  f.objects.finish_task(f.rebuilt[1].spec.id, returns);
  const auto replies = f.net.take<protocol::object_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].first == worker);
  CHECK(replies[0].second.object.ok);
}

TEST_CASE("lineage is bounded by lineage_max_depth and lineage_max_bytes",
          "[core][reference_table][lineage]") {
  const auto saved = knobs();
  auto k = saved;
  k.lineage_max_depth = 2;
  set_knobs(k);
  {
    lineage_fixture f;
    auto a = f.made_on(f.dead, "a");
    auto b = f.made_on(f.dead, "b", {testing::core_pieces::by_ref(a)});
    auto c = f.made_on(f.dead, "c", {testing::core_pieces::by_ref(b)});  // 3 deep
    CHECK(f.objects.lineages() == 2);
    f.objects.on_node_died(f.dead, "killed");
    CHECK(f.rebuilt.size() == 2);
    const auto fail = f.failure_of(c);
    CHECK(fail.message.find("lineage_max_depth (2)") != std::string::npos);
  }
  k = saved;
  k.lineage_max_bytes = 1;
  set_knobs(k);
  {
    lineage_fixture f;
    auto a = f.made_on(f.dead, "a");
    CHECK(f.objects.lineages() == 0);
    f.objects.on_node_died(f.dead, "killed");
    CHECK(f.failure_of(a).message.find("lineage_max_bytes") != std::string::npos);
  }
  set_knobs(saved);
}

TEST_CASE("a borrower that cannot read a stored object where its owner said asks the owner "
          "again, and gets what the owner says now",
          "[core][reference_table][lineage]") {
  lineage_fixture f;
  const address owner{unique_id::random(), "inproc://owner"};
  const object_ref<void> ref(object_id::random(), owner);
  f.net.unreachable.push_back(f.node);  // reads fail as a dead node's would
  std::vector<detail::fetched> got;
  auto t = blocked_in(f.objects, 0, [&] { got = f.objects.fetch({ref}, std::nullopt); });
  REQUIRE(f.net.take<protocol::get_object>().size() == 1);
  // The owner says: stored on a node that has died since. The read there fails.
  f.objects.fill(lineage_fixture::stored(ref.id(), f.dead));
  while (f.objects.awaiting_node_news() == 0) std::this_thread::yield();
  // Not the store's error: the get waits for the head's word that the node died...
  CHECK(f.net.take<protocol::get_object>().empty());
  f.objects.on_node_died(f.dead, "no heartbeat");
  // ...then the owner is asked again, and the get waits for its answer.
  std::vector<std::pair<address, protocol::get_object>> asked;
  while (asked.empty()) {
    asked = f.net.take<protocol::get_object>();
    std::this_thread::yield();
  }
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first == owner);
  protocol::object_payload lost;
  lost.id = ref.id();
  lost.fail = protocol::failure_info::make(detail::failure_kind::object_lost,
                                           error_code::unavailable,
                                           "object ... (the output of produce) was lost");
  f.objects.fill(std::move(lost));
  t.join();
  REQUIRE(got.size() == 1);
  CHECK_FALSE(got[0].ok);
  CHECK(got[0].fail.message.find("the output of produce") != std::string::npos);
}

TEST_CASE("an owner's read that fails before the head declares the node dead waits for that "
          "word, then for the output made again",
          "[core][reference_table][lineage]") {
  lineage_fixture f;
  auto out = f.made_on(f.dead, "produce");
  f.net.unreachable.push_back(f.node);  // the read fails as a dead node's would
  std::vector<detail::fetched> got;
  std::thread t([&] { got = f.objects.fetch({out}, std::nullopt); });
  while (f.objects.awaiting_node_news() == 0) std::this_thread::yield();
  CHECK(f.rebuilt.empty());  // nothing is made again on a failed read alone
  f.objects.on_node_died(f.dead, "no heartbeat");
  REQUIRE(f.rebuilt.size() == 1);
  std::vector<protocol::object_payload> returns{value(out.id(), "made again")};
  f.objects.finish_task(f.rebuilt[0].spec.id, returns);
  t.join();
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].ok);
  CHECK(got[0].payload == "made again");
}

TEST_CASE("an owner's read that fails on a node never declared dead fails after the time the "
          "head takes to declare one",
          "[core][reference_table][lineage]") {
  const auto saved = knobs();
  auto k = saved;
  k.node_timeout_ms = 20;
  k.heartbeat_ms = 5;
  set_knobs(k);
  {
    lineage_fixture f;
    auto out = f.made_on(f.dead, "produce");
    f.net.unreachable.push_back(f.node);
    const auto got = f.objects.fetch({out}, std::nullopt);
    REQUIRE(got.size() == 1);
    CHECK_FALSE(got[0].ok);
    CHECK(got[0].fail.kind == detail::failure_kind::object_lost);
    CHECK(got[0].fail.message.find("could not be read from the object store") !=
          std::string::npos);
    CHECK(f.rebuilt.empty());
  }
  set_knobs(saved);
}

TEST_CASE("an object whose node died is read from a copy another node pulled, and freed there",
          "[core][reference_table][lineage]") {
  lineage_fixture f;
  auto out = f.made_on(f.dead, "produce");
  auto put = f.objects.put(lineage_fixture::stored(object_id::random(), f.dead));
  const node_id copied = node_id::random(), gone = node_id::random();
  const address copied_at{unique_id::random(), "inproc://copied"};
  const address gone_at{unique_id::random(), "inproc://gone"};
  f.objects.on_copied({out.id(), gone, gone_at});
  f.objects.on_copied({out.id(), copied, copied_at});
  f.objects.on_copied({put.id(), copied, copied_at});
  f.objects.on_node_died(gone, "killed");  // its copy goes with it
  f.objects.on_node_died(f.dead, "no heartbeat");
  CHECK(f.rebuilt.empty());  // neither is made again nor lost
  for (const auto& ref : {out, put}) {
    CHECK(f.objects.ready(ref.id()));
    protocol::task_spec reader;
    reader.args.push_back({true, ref.id(), f.self, {}});
    const auto at = f.objects.locality_of(reader);
    REQUIRE(at.size() == 1);
    CHECK(at[0].node == copied);
  }
  f.net.take<protocol::store_free>();
  out = {};
  const auto freed = f.net.take<protocol::store_free>();
  REQUIRE(freed.size() == 1);  // where it is now, once; not the dead nodes
  CHECK(freed[0].first == copied_at);
}

TEST_CASE("an object's entry is small: what most objects never need is kept out of line",
          "[core][reference_table][queued]") {
  // One per queued task's result in a driver that may queue a million (docs/benchmarks.md,
  // "Queued tasks"): a payload (280 bytes), borrowers, copies and waiters beyond the first
  // are boxed, made when first needed.
  STATIC_REQUIRE(reference_table::entry_bytes <= 64);
  STATIC_REQUIRE(sizeof(protocol::object_payload) > 4 * reference_table::entry_bytes);
  // Entries of results still to come carry no payload, and fill as before.
  testing::core_pieces f;
  std::vector<std::pair<task_id, object_ref<void>>> pending;
  for (int i = 0; i < 100; ++i) {
    auto spec = f.task("f");
    auto ref = f.objects.submit(spec, {});
    pending.emplace_back(spec.id, std::move(ref));
  }
  CHECK(f.objects.owned_objects() == 100);
  for (int i = 0; i < 100; i += 2) {
    auto r = testing::core_pieces::result(pending[static_cast<std::size_t>(i)].first, std::to_string(i));
    f.objects.finish_task(r.task, r.returns);
  }
  for (int i = 0; i < 100; ++i) {
    const auto& ref = pending[static_cast<std::size_t>(i)].second;
    REQUIRE(f.objects.ready(ref.id()) == (i % 2 == 0));
    if (i % 2 == 0) CHECK(f.value_of(ref).payload == std::to_string(i));
  }
}

// when_ready: a wait no thread blocks in (a coroutine call's co_await).
TEST_CASE("when_ready calls back once, on the fill; at once it is ready, it does not", "[core][reference_table]") {
  testing::core_pieces f;
  auto ready = f.objects.put(value(object_id::random(), "r"));
  int calls = 0;
  CHECK_FALSE(f.objects.when_ready(ready, [&] { ++calls; }));  // ready now: the caller goes on
  auto spec = f.task("f");
  auto pending = f.objects.submit(spec, {});
  CHECK(f.objects.when_ready(pending, [&] { ++calls; }));
  CHECK(f.objects.when_ready(pending, [&] { calls += 10; }));  // two waits on one object
  CHECK(calls == 0);
  f.objects.fill(value(spec.return_id(), "v"));
  CHECK(calls == 11);
  f.objects.fill(value(spec.return_id(), "again"));  // a later fill is stale: no second call
  CHECK(calls == 11);
  // A borrowed object: its owner is asked, and the reply's fill calls back.
  const address owner{unique_id::random(), {}};
  const object_ref<void> borrowed(object_id::random(), owner);
  CHECK(f.objects.when_ready(borrowed, [&] { ++calls; }));
  REQUIRE(f.net.take<protocol::get_object>().size() == 1);
  f.objects.fill(value(borrowed.id(), "b"));
  CHECK(calls == 12);
  // An owned id it never made is lost at once: ready now, no call.
  CHECK_FALSE(f.objects.when_ready(object_ref<void>(object_id::random(), {}), [&] { ++calls; }));
  CHECK(calls == 12);
}

TEST_CASE("when_ready's waits are called at stop, and none is taken after", "[core][reference_table]") {
  testing::core_pieces f;
  auto spec = f.task("f");
  auto pending = f.objects.submit(spec, {});
  int calls = 0;
  CHECK(f.objects.when_ready(pending, [&] { ++calls; }));
  f.objects.stop("the cluster is gone", error_code::unavailable);
  CHECK(calls == 1);
  CHECK_FALSE(f.objects.when_ready(pending, [&] { ++calls; }));  // the caller's get throws the stop
  f.objects.fill(value(spec.return_id(), "late"));
  CHECK(calls == 1);
}
