// Protocol messages survive a msgpack round trip (the cluster transport's encoding).
#include "protocol/messages.hpp"

#include <catch2/catch.hpp>

using namespace celer;

namespace {
template <class T>
T round_trip(const T& v) {
  return detail::unpack<T>(detail::pack(v), "message");
}
} // namespace

TEST_CASE("a task spec round-trips through msgpack", "[protocol]") {
  protocol::task_spec s;
  s.id = task_id::random();
  s.kind = protocol::task_kind::actor_call;
  s.function = "counter::incr";
  s.args.push_back({false, {}, {}, detail::pack(5)});
  s.args.push_back({true, object_id::random(), address{unique_id::random(), "tcp://h:1"}, {}});
  s.resources = *protocol::make_request(0.5, 0.25, 1024, {{"ssd", 1}});
  s.owner = address{unique_id::random(), "tcp://owner:2"};
  s.actor = actor_id::random();
  s.max_concurrency = 4;
  auto back = round_trip(s);
  REQUIRE(back.id == s.id);
  REQUIRE(back.kind == s.kind);
  REQUIRE(back.function == s.function);
  REQUIRE(back.args.size() == 2);
  REQUIRE(back.args[1].is_ref);
  REQUIRE(back.args[1].ref == s.args[1].ref);
  REQUIRE(back.args[1].owner == s.args[1].owner);
  REQUIRE(back.resources.amounts == s.resources.amounts);
  REQUIRE(back.owner == s.owner);
  REQUIRE(back.actor == s.actor);
  REQUIRE(back.max_concurrency == 4);
  REQUIRE(back.return_id() == s.return_id());
}

TEST_CASE("a failure round-trips through msgpack", "[protocol]") {
  protocol::task_result r;
  r.task = task_id::random();
  protocol::object_payload v;
  v.id = object_id::random();
  v.fail.kind = detail::failure_kind::actor_died;
  v.fail.code = error_code::unavailable;
  v.fail.message = "gone";
  r.returns.push_back(v);
  auto back = round_trip(r);
  REQUIRE(back.returns.size() == 1);
  REQUIRE(back.returns[0].fail.kind == detail::failure_kind::actor_died);
  REQUIRE(back.returns[0].fail.code == error_code::unavailable);
  REQUIRE(back.returns[0].fail.message == "gone");
}

TEST_CASE("every message kind has a name", "[protocol]") {
  protocol::message m = protocol::shutdown_component{"x"};
  REQUIRE(std::string(protocol::name_of(m)) == "shutdown_component");
  m = protocol::request_lease{};
  REQUIRE(std::string(protocol::name_of(m)) == "request_lease");
}

TEST_CASE("a task's return id differs from its task id only in the index bits", "[protocol]") {
  protocol::task_spec s;
  s.id = task_id(unique_id{7, 3u << 16});
  REQUIRE(s.return_id().hi == 7);
  REQUIRE(s.return_id().lo == ((3u << 16) | 1));
}

TEST_CASE("garbage bytes are rejected with invalid_argument, not a crash", "[protocol]") {
  const std::string garbage = "\xc1\xff\x00garbage";
  REQUIRE_THROWS_AS(detail::unpack<protocol::task_spec>(garbage, "spec"), exception);
  const std::string wrong_shape = detail::pack(std::vector<int>{1, 2, 3});
  REQUIRE_THROWS_AS(detail::unpack<protocol::task_spec>(wrong_shape, "spec"), exception);
}
