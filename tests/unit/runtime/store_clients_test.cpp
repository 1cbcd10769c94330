// Who holds the node store's objects and who may touch them, on their own: store_clients
// (node/store_clients.hpp) dropping exactly the pins of a process that is gone or a job that
// ended, and job_fence (node/job_fence.hpp) keeping each job to its own objects. On a real
// object store, whose pin counts tell what was dropped.
#include "node/job_fence.hpp"
#include "node/store_clients.hpp"

#include <celer/store/object_store.hpp>

#include <catch2/catch.hpp>

using namespace celer;

namespace {

struct clients_parts {
  std::unique_ptr<store::object_store> objects = open();
  store_clients clients{*objects};
  job_id job = job_id::random();

  static std::unique_ptr<store::object_store> open() {
    auto s = store::object_store::open({.capacity = 16 << 20});
    REQUIRE(s);
    return std::move(*s);
  }
  /// An object `owner` created for `of` and sealed, pinned by nobody.
  object_id put(const address& owner, const job_id& of) {
    const auto id = object_id::random();
    REQUIRE(objects->create(id, 1000, 0, {owner.id, of}, /*durable=*/false));
    REQUIRE(objects->seal(id));
    objects->unpin(id);
    clients.owns(owner);
    return id;
  }
  /// `client`, of `of`, maps `id`.
  void read(const address& client, const object_id& id, const job_id& of) {
    REQUIRE(objects->pin(id));
    clients.pinned(client, id);
    clients.joined(client.id, of);
  }
  [[nodiscard]] std::size_t pinned() const { return objects->stats().pinned_objects; }
};

} // namespace

TEST_CASE("a client's releases drop its pins one by one, and its last one forgets it", "[store][clients]") {
  clients_parts p;
  const address reader{unique_id::random(), "ipc://reader"};
  const auto id = p.put({unique_id::random(), "ipc://writer"}, p.job);
  p.read(reader, id, p.job);
  p.read(reader, id, p.job);
  CHECK(p.clients.pins(reader.id, id) == 2);
  p.clients.unpin(reader, object_id::random());  // never pinned: nothing changes
  p.clients.unpin({unique_id::random(), "ipc://stranger"}, id);
  CHECK(p.clients.pins(reader.id, id) == 2);
  CHECK(p.pinned() == 1);
  p.clients.unpin(reader, id);
  CHECK(p.clients.pins(reader.id, id) == 1);
  CHECK(p.clients.knows(reader.id));
  p.clients.unpin(reader, id);
  CHECK(p.pinned() == 0);
  CHECK_FALSE(p.clients.knows(reader.id));
}

TEST_CASE("a process that is gone has its pins dropped and the objects it owned freed, others' stay",
          "[store][clients]") {
  clients_parts p;
  const address writer{unique_id::random(), "ipc://writer"};
  const address other{unique_id::random(), "ipc://other"};
  const auto mine = p.put(writer, p.job);
  const auto theirs = p.put(other, p.job);
  p.read(writer, theirs, p.job);
  p.read(writer, theirs, p.job);
  p.read(other, theirs, p.job);
  CHECK(p.objects->stats().objects_in_memory == 2);

  p.clients.process_gone("ipc://nobody");
  p.clients.process_gone("");
  CHECK(p.clients.pins(writer.id, theirs) == 2);

  p.clients.process_gone(writer.endpoint);
  CHECK_FALSE(p.clients.knows(writer.id));
  CHECK_FALSE(p.objects->contains(mine));
  CHECK(p.objects->contains(theirs));
  CHECK(p.clients.pins(other.id, theirs) == 1);
  CHECK(p.pinned() == 1);
}

TEST_CASE("a job's end drops the pins of that job's clients and no other's", "[store][clients]") {
  clients_parts p;
  const job_id other_job = job_id::random();
  const address a{unique_id::random(), "ipc://a"};
  const address b{unique_id::random(), "ipc://b"};
  const auto id = p.put({unique_id::random(), "ipc://writer"}, p.job);
  const auto other_id = p.put({unique_id::random(), "ipc://other-writer"}, other_job);
  p.read(a, id, p.job);
  p.read(b, other_id, other_job);
  REQUIRE(p.pinned() == 2);
  p.clients.job_finished(p.job);
  CHECK_FALSE(p.clients.knows(a.id));
  CHECK(p.clients.pins(b.id, other_id) == 1);
  CHECK(p.pinned() == 1);
}

TEST_CASE("a job may act on its own objects and on none of another job's; the cluster on any", "[store][security]") {
  clients_parts p;
  job_fence fence(*p.objects);
  const auto id = p.put({unique_id::random(), "ipc://writer"}, p.job);
  CHECK(fence.allows(p.job, id, "read"));
  CHECK(fence.allows(job_id{}, id, "read"));                    // the head, a node, the agent
  CHECK(fence.allows(job_id::random(), object_id::random(), "read"));  // not here: a pull checks
  CHECK(fence.refused() == 0);
  CHECK_FALSE(fence.allows(job_id::random(), id, "seal"));
  CHECK_FALSE(fence.allows(job_id::random(), id, "free"));
  CHECK(fence.refused() == 2);
}
