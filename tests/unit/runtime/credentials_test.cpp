// Credentials derived from the cluster token, the identities connections carry, and what
// each identity may send (admission). Pure functions: no sockets here (transport_test.cpp
// has the handshakes).
#include "protocol/messages.hpp"
#include "transport/admission.hpp"
#include "transport/credentials.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

using namespace celer;
using Catch::Matchers::Contains;

TEST_CASE("keys derive from the token: the same token gives the same keys, another token others",
          "[security]") {
  auto a = *credentials::for_cluster("token-a");
  auto a2 = *credentials::for_cluster("token-a");
  auto b = *credentials::for_cluster("token-b");
  REQUIRE(a.public_key() == a2.public_key());
  REQUIRE(a.public_key() != b.public_key());
  REQUIRE(a.public_key() != a.secret_key());
  REQUIRE(a.identity().role == peer_role::cluster);
  REQUIRE_FALSE(credentials::for_cluster("").has_value());
}

TEST_CASE("a job's credential gives its keys and nothing of the cluster's", "[security]") {
  auto head = *credentials::for_cluster("t");
  const job_id job = job_id::random(), other = job_id::random();
  auto secret = *head.job_secret_hex(job);
  auto worker = *credentials::for_job(job, secret, head.cluster_public_hex());
  REQUIRE(worker.identity() == peer_identity{peer_role::job, job});
  REQUIRE(worker.public_key() == *head.job_public(job));
  REQUIRE(worker.cluster_public() == head.cluster_public());
  REQUIRE_FALSE(worker.holds_cluster_secret());
  // It can neither issue credentials nor learn another job's key.
  REQUIRE(worker.job_secret_hex(other).error().code() == error_code::permission_denied);
  REQUIRE(worker.job_public(other).error().code() == error_code::permission_denied);
  REQUIRE(worker.cluster_keypair().error().code() == error_code::permission_denied);
  // Its secret is not the cluster's, and differs per job.
  REQUIRE(secret != *head.job_secret_hex(other));
  REQUIRE(secret != head.plain_password());
  // A driver holding the token speaks as the same job with the same keys.
  auto driver = *credentials::for_driver("t", job);
  REQUIRE(driver.public_key() == worker.public_key());
  REQUIRE(driver.identity() == worker.identity());
  REQUIRE(driver.holds_cluster_secret());
}

TEST_CASE("malformed job credentials are refused", "[security]") {
  const auto key = credentials::for_cluster("t")->cluster_public_hex();
  REQUIRE_FALSE(credentials::for_job(job_id::random(), "abc", key).has_value());
  REQUIRE_FALSE(credentials::for_job(job_id::random(), std::string(64, 'z'), key).has_value());
  REQUIRE_FALSE(credentials::for_job(job_id{}, std::string(64, 'a'), key).has_value());
}

TEST_CASE("PLAIN passwords prove exactly the identity they name", "[security]") {
  auto head = *credentials::for_cluster("t");
  const job_id job = job_id::random(), other = job_id::random();
  auto worker = *credentials::for_job(job, *head.job_secret_hex(job), head.cluster_public_hex());
  REQUIRE(head.check_plain("cluster", head.plain_password()) == peer_identity{peer_role::cluster, {}});
  REQUIRE(head.check_plain("job:" + job.hex(), worker.plain_password()) ==
          peer_identity{peer_role::job, job});
  REQUIRE_FALSE(head.check_plain("job:" + other.hex(), worker.plain_password()));
  REQUIRE_FALSE(head.check_plain("cluster", worker.plain_password()));
  REQUIRE_FALSE(head.check_plain("cluster", "not hex"));
  // A job's process accepts its own job, and the cluster's secret, which it checks against
  // the cluster's public key (it does not hold the secret).
  REQUIRE(worker.check_plain("job:" + job.hex(), worker.plain_password()));
  REQUIRE(worker.check_plain("cluster", head.plain_password()) == peer_identity{peer_role::cluster, {}});
  REQUIRE_FALSE(worker.check_plain("cluster", worker.plain_password()));
  REQUIRE_FALSE(worker.check_plain("job:" + other.hex(), worker.plain_password()));
}

TEST_CASE("identities and job endpoints read back as written", "[security]") {
  const job_id job = job_id::random();
  REQUIRE(peer_identity::parse("cluster")->role == peer_role::cluster);
  REQUIRE(peer_identity::parse(peer_identity{peer_role::job, job}.user_id())->job == job);
  REQUIRE_FALSE(peer_identity::parse("job:xyz"));
  REQUIRE_FALSE(peer_identity::parse(""));
  auto e = split_endpoint(job_endpoint("tcp://10.0.0.2:4711", job));
  REQUIRE(e->tcp == "tcp://10.0.0.2:4711");
  REQUIRE(e->job == job);
  REQUIRE(split_endpoint("tcp://10.0.0.2:4711")->job.nil());
  REQUIRE(split_endpoint("tcp://h:1#job=nothex").error().code() == error_code::invalid_argument);
}

TEST_CASE("ids read back from their 16 bytes, big-endian", "[security]") {
  const unique_id id{0x0102030405060708ULL, 0x090a0b0c0d0e0f10ULL};
  REQUIRE(id.bytes() == std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 16));
  REQUIRE(unique_id::from_bytes(id.bytes()) == id);
  const auto r = unique_id::random();
  REQUIRE(unique_id::from_bytes(r.bytes()) == r);
  REQUIRE_FALSE(unique_id::from_bytes("short"));
  REQUIRE_FALSE(unique_id::from_bytes(std::string(17, 'x')));
}

TEST_CASE("the cluster may send any wire message, but never an in-process one", "[security]") {
  const peer_identity cluster{peer_role::cluster, {}};
  protocol::message hb = protocol::heartbeat{};
  REQUIRE(admit(cluster, hb).has_value());
  protocol::message t = protocol::tick{};
  auto r = admit(cluster, t);
  REQUIRE(r.error().code() == error_code::permission_denied);
  REQUIRE_THAT(r.error().message(), Contains("tick") && Contains("never accepted"));
  // A node stops its workers and tells lease owners of dead workers over the wire.
  protocol::message stop = protocol::shutdown_component{};
  REQUIRE(admit(cluster, stop).has_value());
  protocol::message died = protocol::worker_died{};
  REQUIRE(admit(cluster, died).has_value());
}

TEST_CASE("a job may send only messages about its own job", "[security]") {
  const job_id job = job_id::random(), other = job_id::random();
  const peer_identity who{peer_role::job, job};
  protocol::message mine = protocol::job_finished{job};
  REQUIRE(admit(who, mine).has_value());
  protocol::message theirs = protocol::job_finished{other};
  REQUIRE_THAT(admit(who, theirs).error().message(), Contains(other.short_hex()));
  protocol::message hb = protocol::heartbeat{};
  REQUIRE_THAT(admit(who, hb).error().message(), Contains("only the head and nodes"));
  for (protocol::message m : {protocol::message{protocol::shutdown_component{}},
                              protocol::message{protocol::worker_died{}},
                              protocol::message{protocol::tick{}}}) {
    REQUIRE(admit(who, m).error().code() == error_code::permission_denied);
  }
  // An actor call names no job: it is stamped with the caller's.
  protocol::message call = protocol::execute_task{};
  REQUIRE(admit(who, call).has_value());
  REQUIRE(std::get<protocol::execute_task>(call).spec.job == job);
  protocol::create_actor c;
  c.spec.job = other;
  protocol::message foreign = c;
  REQUIRE(admit(who, foreign).error().code() == error_code::permission_denied);
  protocol::create_placement_group g;
  g.job = other;
  protocol::message group = g;
  REQUIRE_FALSE(admit(who, group).has_value());
  // The job a message speaks for is stamped, whatever the sender wrote.
  protocol::message kill = protocol::kill_actor{actor_id::random(), "x", other};
  REQUIRE(admit(who, kill).has_value());
  REQUIRE(std::get<protocol::kill_actor>(kill).sender_job == job);
  protocol::message freed = protocol::store_free{{object_id::random()}, other};
  REQUIRE(admit(who, freed).has_value());
  REQUIRE(std::get<protocol::store_free>(freed).sender_job == job);
  // So are a worker's messages about itself, lease cancellations and store requests, which
  // the node checks against the worker, request or object they name.
  protocol::store_get get;
  get.job = job;
  for (protocol::message m :
       {protocol::message{protocol::worker_ready{{}, {}, other}},
        protocol::message{protocol::worker_blocked{{}, other}},
        protocol::message{protocol::worker_unblocked{{}, other}},
        protocol::message{protocol::actor_exited{{}, {}, other}},
        protocol::message{protocol::preempt_ready{{}, {}, other}},
        protocol::message{protocol::gpu_usage{{}, 0, 0, other}},
        protocol::message{protocol::cancel_lease_requests{{}, {}, false, other}},
        protocol::message{protocol::store_seal{0, {}, {}, other}}, protocol::message{get},
        protocol::message{protocol::store_release{{}, {}, false, other}}}) {
    INFO(protocol::name_of(m));
    REQUIRE(admit(who, m).has_value());
    std::visit(
      [&](const auto& x) {
        if constexpr (requires { x.sender_job; }) {
          CHECK(x.sender_job == job);
        } else {
          FAIL("no sender_job");
        }
      },
      m);
  }
}

TEST_CASE("docs/protocol.md holds the table messages.def makes", "[security][docs]") {
  std::ifstream in(std::string(CELER_SOURCE_DIR) + "/docs/protocol.md");
  REQUIRE(in.good());
  std::stringstream all;
  all << in.rdbuf();
  const std::string table = protocol::markdown_table();
  INFO("docs/protocol.md must contain this table (from messages.def):\n" + table);
  REQUIRE_THAT(all.str(), Contains(table));
}

TEST_CASE("a shared namespace's job is derived from its name alone, and marked", "[security][detached]") {
  const job_id team = namespace_job("team");
  REQUIRE(team == namespace_job("team"));
  REQUIRE(team != namespace_job("team2"));
  REQUIRE_FALSE(team.nil());
  REQUIRE(is_namespace_job(team));
  int marked = 0;
  for (int i = 0; i < 1000; ++i) marked += is_namespace_job(job_id::random()) ? 1 : 0;
  REQUIRE(marked < 3);  // once in 65,536
  // Head and nodes derive its keys as any job's.
  auto head = *credentials::for_cluster("t");
  auto worker = *credentials::for_job(team, *head.job_secret_hex(team), head.cluster_public_hex());
  REQUIRE(worker.public_key() == *head.job_public(team));
}

TEST_CASE("an endpoint may give its job's key, and a malformed one is refused", "[security][detached]") {
  const job_id job = namespace_job("team");
  const key32 key = *credentials::for_cluster("t")->job_public(job);
  const auto with = job_endpoint("tcp://10.0.0.2:4711", job, key);
  auto parts = split_endpoint(with);
  REQUIRE(parts);
  REQUIRE(parts->tcp == "tcp://10.0.0.2:4711");
  REQUIRE(parts->job == job);
  REQUIRE(parts->key == key);
  auto plain = split_endpoint(job_endpoint("tcp://10.0.0.2:4711", job));
  REQUIRE(plain);
  REQUIRE_FALSE(plain->key);
  REQUIRE_FALSE(split_endpoint("tcp://10.0.0.2:4711#job=" + job.hex() + "&key=abc"));
  REQUIRE_FALSE(split_endpoint("tcp://10.0.0.2:4711#job=&key=" + key_hex(key)));
}

TEST_CASE("from another job a job's process takes only a detached actor's calls, answers and cancels",
          "[security][detached]") {
  const job_id host = namespace_job("team"), guest = job_id::random();
  const peer_identity self{peer_role::job, host}, who{peer_role::job, guest};
  protocol::execute_task call;
  call.spec.kind = protocol::task_kind::actor_call;
  protocol::message m = call;
  REQUIRE(admit(who, m, &self).has_value());
  REQUIRE(std::get<protocol::execute_task>(m).spec.job == guest);  // stamped: the call's job
  protocol::message cancel = protocol::cancel_task{};
  REQUIRE(admit(who, cancel, &self).has_value());
  protocol::message result = protocol::task_result{};
  REQUIRE(admit(who, result, &self).has_value());
  // Not a task, nor an actor's creation, nor anything not marked shared.
  for (auto kind : {protocol::task_kind::normal, protocol::task_kind::actor_creation}) {
    protocol::execute_task t;
    t.spec.kind = kind;
    protocol::message tm = t;
    REQUIRE_THAT(admit(who, tm, &self).error().message(), Contains("only an actor call"));
  }
  for (protocol::message other : {protocol::message{protocol::get_object{}}, protocol::message{protocol::peer_data{}},
                                  protocol::message{protocol::generator_item{}}}) {
    auto r = admit(who, other, &self);
    REQUIRE(r.error().code() == error_code::permission_denied);
    REQUIRE_THAT(r.error().message(), Contains("cross jobs"));
  }
  // Its own job's messages are as before.
  const peer_identity mate{peer_role::job, host};
  protocol::message own = protocol::get_object{};
  REQUIRE(admit(mate, own, &self).has_value());
}
