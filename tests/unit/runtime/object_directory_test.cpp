// The head's object directory (head/object_directory.hpp) on its own: nodes' reports of
// durable objects, answers to locate_object that name only live holders, the latest report
// winning, and its rows in the head's tables read back by a directory started again.
#include "fakes/memory_table_db.hpp"
#include "fakes/recording_transport.hpp"
#include "head/object_directory.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <set>

using namespace celer;

namespace {

/// A directory over a recording transport, with a node table the test writes.
struct directory {
  fakes::recording_transport net;
  std::map<node_id, address> alive;
  std::unique_ptr<head_tables> tables;
  object_directory dir;
  explicit directory(std::shared_ptr<fakes::memory_table_db::rows> rows = nullptr)
    : tables(rows ? std::make_unique<head_tables>(std::make_shared<fakes::memory_table_db>(rows)) : nullptr),
      dir(net, tables.get(), [this](const node_id& n) -> std::optional<address> {
        auto it = alive.find(n);
        return it == alive.end() ? std::nullopt : std::optional<address>(it->second);
      }) {}
  protocol::object_location locate(const object_id& id, std::uint64_t request = 1) {
    const address asker{unique_id::random(), "tcp://10.0.0.9:4000"};
    protocol::message m = protocol::locate_object{request, asker, id};
    dir.on(std::get<protocol::locate_object>(m));
    auto replies = net.take<protocol::object_location>();
    REQUIRE(replies.size() == 1);
    CHECK(replies[0].first == asker);
    CHECK(replies[0].second.request_id == request);
    return replies[0].second;
  }
  void report(const node_id& n, std::vector<object_id> ids) {
    protocol::durable_objects m{n, std::move(ids)};
    dir.on(m);
  }
};

} // namespace

TEST_CASE("the object directory names the live node whose disk holds an object, and no other", "[head][objects]") {
  directory d;
  const node_id a = node_id::random(), b = node_id::random();
  d.alive[a] = address{a, "tcp://10.0.0.1:7000"};
  const object_id x = object_id::random(), y = object_id::random();
  d.report(a, {x});
  d.report(b, {y});  // b is not alive
  CHECK(d.dir.size() == 2);
  auto at_a = d.locate(x, 7);
  CHECK(at_a.found);
  CHECK(at_a.node == a);
  CHECK(at_a.node_addr == d.alive[a]);
  CHECK_FALSE(d.locate(y).found);                   // its holder is dead
  CHECK_FALSE(d.locate(object_id::random()).found);  // never reported
  // The latest report wins: a restarted node under a new id found x on its disk.
  const node_id a2 = node_id::random();
  d.alive.erase(a);
  d.alive[a2] = address{a2, "tcp://10.0.0.1:7001"};
  d.report(a2, {x});
  auto moved = d.locate(x);
  CHECK(moved.found);
  CHECK(moved.node == a2);
  CHECK(d.dir.size() == 2);
}

TEST_CASE("the object directory writes only changed rows, and a directory started again reads them", "[head][objects]") {
  auto rows = std::make_shared<fakes::memory_table_db::rows>();
  const node_id a = node_id::random(), b = node_id::random();
  const object_id x = object_id::random(), y = object_id::random();
  {
    directory first(rows);
    first.report(a, {x, y});
    const auto writes = rows->writes;
    first.report(a, {x, y});  // known as they are: nothing written
    CHECK(rows->writes == writes);
    first.report(b, {y});  // y moved to b: one write
    CHECK(rows->writes == writes + 1);
  }
  directory second(rows);
  auto state = second.tables->load();
  REQUIRE(state);
  second.dir.restore(state->durable);
  CHECK(second.dir.size() == 2);
  second.alive[b] = address{b, "tcp://10.0.0.2:7000"};
  auto at_b = second.locate(y);
  CHECK(at_b.found);
  CHECK(at_b.node == b);
  CHECK_FALSE(second.locate(x).found);  // a is not alive in the new head's view
}
