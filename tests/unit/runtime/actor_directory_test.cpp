// The head's actor directory (head/actor_directory.hpp) on its own, on the recording
// transport, with a scheduler the test plays: actors registered and placed, names in
// namespaces, restarts counted against max_restarts, parked actors placed once a node is
// alive, node_died and job_ended events, subscriber bounds, rows written and read back.
#include "head/actor_directory.hpp"
#include "unit/runtime/head_managers.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using namespace celer_test;

namespace {

struct directory : head_parts {
  placement_groups groups{net, &tables, nodes, view, guard, events, {}};
  /// What the scheduler answers, and the actors it was handed.
  actor_directory::placing answer = actor_directory::placing::started;
  node_id target;
  std::vector<actor_id> placed;
  actor_directory actors{net, &tables, nodes, groups, guard, events, [this](actor_directory::actor& a, std::string& why) {
                           placed.push_back(a.spec.actor);
                           if (answer == actor_directory::placing::started) a.node = target;
                           if (answer == actor_directory::placing::never) why = "it needs 99 GPUs";
                           return answer;
                         }};
  const address driver{unique_id::random(), "tcp://10.0.0.9:1#job=1"};
  const job_id job = job_id::random();

  actor_id make(std::string name = {}, int max_restarts = 0, std::string name_space = {}) {
    auto spec = actor_spec(driver, job, std::move(name), max_restarts);
    spec.name_space = std::move(name_space);
    auto c = create(driver, spec);
    actors.on(c);
    return spec.actor;
  }
  void started(const actor_id& id, const address& worker) {
    protocol::actor_started m{id, worker, {}, {}};
    actors.on(m);
  }
  std::optional<actor_id> lookup(const std::string& name, const job_id& as, std::string name_space = {}) {
    protocol::lookup_actor m{1, driver, name, as, std::move(name_space)};
    actors.on(m);
    auto r = net.take<protocol::lookup_actor_reply>();
    REQUIRE(r.size() == 1);
    if (!r[0].second.found) return std::nullopt;
    return r[0].second.actor;
  }
};

protocol::failure_info process_died() {
  return protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                      "its worker process was killed");
}

} // namespace

TEST_CASE("an actor is registered, handed to the scheduler and found by name in its job's namespace",
          "[head][actors]") {
  directory d;
  d.target = node_id::random();
  const auto id = d.make("counter");
  auto replies = d.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].second.ok);
  CHECK(d.placed == std::vector<actor_id>{id});
  REQUIRE(d.actors.find(id) != nullptr);
  CHECK(d.actors.find(id)->node == d.target);
  CHECK(d.lookup("counter", d.job) == id);
  CHECK(!d.lookup("counter", job_id::random()));  // another job's namespace
  // The same name again in the job: refused; a retried create of the same actor: ok.
  (void)d.make("counter");
  replies = d.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].second.fail.code == error_code::already_exists);
  // Alive: its subscriber (the creator) hears it.
  const address w{unique_id::random(), "tcp://10.0.0.1:7101"};
  d.started(id, w);
  auto updates = d.net.take<protocol::actor_update>();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].first == d.driver);
  CHECK(updates[0].second.state == protocol::actor_state::alive);
  std::uint32_t alive = 0, pending = 0;
  d.actors.count(d.job, alive, pending);
  CHECK(alive == 1);
  CHECK(pending == 0);
  // A shared namespace is shared across jobs; the job's first one is its default.
  const auto shared = d.make("ps", 0, "team");
  CHECK(d.lookup("ps", job_id::random(), "team") == shared);
  CHECK(d.lookup("ps", d.job) == shared);
}

TEST_CASE("one that can never be placed is refused with why; another job's actor cannot be touched",
          "[head][actors][security]") {
  directory d;
  d.answer = actor_directory::placing::never;
  const auto id = d.make("big");
  auto replies = d.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].second.fail.code == error_code::resource_exhausted);
  CHECK(replies[0].second.fail.message.find("it needs 99 GPUs") != std::string::npos);
  CHECK(d.actors.find(id) == nullptr);

  d.answer = actor_directory::placing::started;
  const auto mine = d.make();
  d.net.sent.clear();
  const job_id other = job_id::random();
  protocol::kill_actor kill{mine, "killed"};
  kill.sender_job = other;
  d.actors.on(kill);
  CHECK(d.actors.find(mine)->state == protocol::actor_state::pending);
  protocol::subscribe_actor sub{mine, address{unique_id::random(), "tcp://evil:1"}};
  sub.sender_job = other;
  d.actors.on(sub);
  CHECK(d.net.sent.empty());  // nothing sent to the address another job gave
  // Subscribers are bounded by the length of their address.
  protocol::subscribe_actor longer{mine, address{unique_id::random(), std::string(600, 'x')}};
  longer.sender_job = d.job;
  d.actors.on(longer);
  CHECK(d.actors.find(mine)->subscribers.size() == 1);
}

TEST_CASE("a dead process restarts its actor until max_restarts; a failed constructor does not",
          "[head][actors][fault]") {
  directory d;
  d.target = node_id::random();
  const auto id = d.make("counter", 1);
  d.started(id, address{unique_id::random(), "tcp://10.0.0.1:7101"});
  d.net.sent.clear();
  protocol::actor_failed died{id, process_died(), {}};
  d.actors.on(died);
  CHECK(d.actors.find(id)->state == protocol::actor_state::restarting);
  CHECK(d.actors.find(id)->restarts == 1);
  CHECK(d.placed.size() == 2);  // handed to the scheduler again
  d.started(id, address{unique_id::random(), "tcp://10.0.0.1:7102"});
  protocol::actor_failed again{id, process_died(), {}};
  d.actors.on(again);
  CHECK(d.actors.find(id)->state == protocol::actor_state::dead);
  CHECK(!d.lookup("counter", d.job));  // a dead actor's name is free
  head_snapshot s;
  d.actors.fill(s);
  CHECK(s.actor_restarts == 1);

  const auto other = d.make("other", 5);
  protocol::actor_failed threw{other,
                               protocol::failure_info::make(detail::failure_kind::actor_died,
                                                            error_code::internal, "the constructor threw"),
                               {}};
  d.actors.on(threw);
  CHECK(d.actors.find(other)->state == protocol::actor_state::dead);
  // A job's own process cannot make its actor restart.
  const auto third = d.make("third", 5);
  protocol::actor_failed from_job{third, process_died(), d.job};
  d.actors.on(from_job);
  CHECK(d.actors.find(third)->state == protocol::actor_state::dead);
}

TEST_CASE("actors parked while no node was alive are placed when one joins", "[head][actors][fault]") {
  directory d;
  d.answer = actor_directory::placing::parked;
  const auto id = d.make("early");
  CHECK(d.actors.parked() == 1);
  CHECK(d.actors.find(id)->node.nil());
  d.answer = actor_directory::placing::started;
  d.target = node_id::random();
  d.actors.unpark();
  CHECK(d.actors.parked() == 0);
  CHECK(d.actors.find(id)->node == d.target);
  // A parked actor killed meanwhile is not placed.
  d.answer = actor_directory::placing::parked;
  const auto gone = d.make();
  protocol::kill_actor kill{gone, "killed"};
  d.actors.on(kill);
  d.answer = actor_directory::placing::started;
  const auto before = d.placed.size();
  d.actors.unpark();
  CHECK(d.placed.size() == before);
}

TEST_CASE("node_died restarts or ends the node's actors; job_ended stops and forgets the job's",
          "[head][actors][fault]") {
  directory d;
  const node_id n = node_id::random();
  const address node_addr = d.join(n);
  d.target = n;
  const auto restartable = d.make("a", -1);
  const auto once = d.make("b", 0);
  d.started(restartable, address{unique_id::random(), "tcp://10.0.0.1:7101"});
  d.started(once, address{unique_id::random(), "tcp://10.0.0.1:7102"});
  std::vector<std::string> workers;
  d.actors.add_workers_on(n, workers);
  CHECK(workers.size() == 2);
  d.target = node_id::random();  // where the restart goes
  d.node_dies(n, "missed its heartbeats");
  CHECK(d.actors.find(restartable)->state == protocol::actor_state::restarting);
  CHECK(d.actors.find(restartable)->node == d.target);
  CHECK(d.actors.find(once)->state == protocol::actor_state::dead);
  CHECK(d.actors.find(once)->fail.message.find("missed its heartbeats") != std::string::npos);

  d.net.sent.clear();
  d.events.job_ended(d.job);
  CHECK(d.actors.find(restartable) == nullptr);
  CHECK(d.actors.find(once) == nullptr);
  auto state = d.tables.load();
  REQUIRE(state);
  CHECK(state->actors.empty());  // their rows are gone too
  (void)node_addr;
}

TEST_CASE("the directory's rows bring actors, names and waiting ones back", "[head][actors][restart]") {
  directory d;
  d.target = node_id::random();
  const auto alive = d.make("alive");
  d.started(alive, address{unique_id::random(), "tcp://10.0.0.1:7101"});
  d.answer = actor_directory::placing::parked;
  const auto waiting = d.make("waiting");
  auto state = d.tables.load();
  REQUIRE(state);
  REQUIRE(state->actors.size() == 2);

  directory again;
  head_tables reopened{std::make_shared<fakes::memory_table_db>(d.rows)};
  auto rows = reopened.load();
  REQUIRE(rows);
  again.actors.restore(std::move(rows->actors));
  REQUIRE(again.actors.find(alive) != nullptr);
  CHECK(again.actors.find(alive)->state == protocol::actor_state::alive);
  CHECK(again.actors.parked() == 1);  // it waits for a node again
  CHECK(again.lookup("alive", d.job) == alive);
  CHECK(again.lookup("waiting", d.job) == waiting);
}
