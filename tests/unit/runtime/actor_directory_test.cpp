// The head's actor directory (head/actor_directory.hpp) on its own, on the recording
// transport, with a scheduler the test plays: actors registered and placed, names in
// namespaces, restarts counted against max_restarts, parked actors placed once a node is
// alive, node_died and job_ended events, subscriber bounds, rows written and read back.
#include "head/actor_directory.hpp"
#include "transport/credentials.hpp"
#include "transport/namespace_grants.hpp"
#include "unit/runtime/head_managers.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

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

TEST_CASE("a detached actor runs as its namespace's job: jobs let in find, reach and kill it, others "
          "do not, and no job's end stops it",
          "[head][actors][detached][security]") {
  directory d;
  namespace_grants grants;
  d.net.enter = [&](const job_id& j, const std::string& n) { return grants.may_enter(j, n); };
  const job_id guest = job_id::random(), outsider = job_id::random();
  grants.grant(d.job, {"team"});
  grants.grant(guest, {std::string(namespace_grants::every)});
  d.target = node_id::random();
  (void)d.join(d.target);
  // Made by d.job: it runs as namespace_job("team"), which the head now hosts.
  auto spec = actor_spec(d.driver, d.job, "svc");
  spec.name_space = "team";
  spec.namespace_named = true;
  spec.detached = true;
  auto c = create(d.driver, spec);
  d.actors.on(c);
  auto replies = d.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 1);
  REQUIRE(replies[0].second.ok);
  const job_id host = namespace_job("team");
  CHECK(replies[0].second.job == host);
  CHECK(d.actors.find(spec.actor)->spec.job == host);
  CHECK(d.net.hosted == std::vector<std::string>{"team"});
  d.started(spec.actor, address{unique_id::random(), "tcp://10.0.0.1:7101#job=" + host.hex()});
  (void)d.net.take<protocol::actor_update>();

  // Found by name, and reached, by the jobs let in; not by the outsider, whose refusal says
  // nothing and sends nothing to the address it gave.
  CHECK(d.lookup("svc", guest, "team") == spec.actor);
  CHECK_FALSE(d.lookup("svc", outsider, "team"));
  protocol::subscribe_actor sub{spec.actor, address{unique_id::random(), "tcp://10.0.0.7:1#job=" + outsider.hex()}};
  sub.sender_job = outsider;
  d.actors.on(sub);
  CHECK(d.net.sent.empty());
  protocol::subscribe_actor ok{spec.actor, address{unique_id::random(), "tcp://10.0.0.8:1#job=" + guest.hex()}};
  ok.sender_job = guest;
  d.actors.on(ok);
  CHECK(d.net.take<protocol::actor_update>().size() == 1);
  protocol::kill_actor refused{spec.actor, "attack"};
  refused.sender_job = outsider;
  d.actors.on(refused);
  CHECK(d.actors.find(spec.actor)->state == protocol::actor_state::alive);
  // Nor may the outsider take a name in the namespace, or make a detached actor there.
  auto squat = actor_spec(d.driver, outsider, "other");
  squat.name_space = "team";
  squat.namespace_named = true;
  auto sc = create(d.driver, squat);
  d.actors.on(sc);
  auto detached_too = actor_spec(d.driver, outsider, "third");
  detached_too.name_space = "team";
  detached_too.namespace_named = true;
  detached_too.detached = true;
  auto dc = create(d.driver, detached_too);
  d.actors.on(dc);
  replies = d.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 2);
  for (const auto& [to, r] : replies) {
    CHECK(r.fail.code == error_code::permission_denied);
    CHECK(r.fail.message.find("not let into namespace 'team'") != std::string::npos);
  }

  // Its creator's job ends, and the guest's: it lives on, without their subscriptions.
  d.events.job_ended(d.job);
  d.events.job_ended(guest);
  REQUIRE(d.actors.find(spec.actor) != nullptr);
  CHECK(d.actors.find(spec.actor)->state == protocol::actor_state::alive);
  const auto& subs = d.actors.find(spec.actor)->subscribers;
  CHECK(std::find(subs.begin(), subs.end(), ok.subscriber) == subs.end());
  // A job let in kills it; its node is told as by the actor's own job.
  d.net.sent.clear();
  protocol::kill_actor kill{spec.actor, "killed"};
  kill.sender_job = guest;
  d.actors.on(kill);
  CHECK(d.actors.find(spec.actor)->state == protocol::actor_state::dead);
  auto kills = d.net.take<protocol::kill_actor>();
  REQUIRE(kills.size() == 1);
  CHECK(kills[0].second.sender_job == host);
}

TEST_CASE("a detached actor needs a name and a shared namespace", "[head][actors][detached]") {
  directory d;
  auto unnamed = actor_spec(d.driver, d.job);
  unnamed.detached = true;
  auto c1 = create(d.driver, unnamed);
  d.actors.on(c1);
  auto nowhere = actor_spec(d.driver, d.job, "svc");
  nowhere.detached = true;
  auto c2 = create(d.driver, nowhere);
  d.actors.on(c2);
  auto replies = d.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].second.fail.message.find("needs a name") != std::string::npos);
  CHECK(replies[1].second.fail.message.find("shared namespace") != std::string::npos);
  CHECK(d.net.hosted.empty());
}
