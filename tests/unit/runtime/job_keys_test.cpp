// job_key_table and key_lookups (transport/job_keys.hpp): whose a job key is, and the
// handshakes that wait for the head to say; namespace_grants: which jobs meet which.
// transport_test.cpp runs them through real handshakes.
#include "transport/credentials.hpp"
#include "transport/job_keys.hpp"
#include "transport/namespace_grants.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>

using namespace celer;
using namespace std::chrono_literals;

namespace {

std::string key_of(int n) { return "key-" + std::to_string(n); }

zap_request request(std::string id, std::chrono::steady_clock::time_point since) {
  return zap_request{{"routing", ""}, std::move(id), since};
}

} // namespace

TEST_CASE("a job key is found once added and not after it is erased", "[transport][keys]") {
  job_key_table table(/*forgetful=*/false);
  const auto a = job_id::random(), b = job_id::random();
  table.add(key_of(1), a);
  table.add(key_of(2), b);
  CHECK(table.find(key_of(1)) == a);
  CHECK(table.find(key_of(2)) == b);
  CHECK_FALSE(table.find(key_of(3)).has_value());
  auto jobs = table.jobs();
  CHECK(jobs.size() == 2);
  CHECK(std::find(jobs.begin(), jobs.end(), a) != jobs.end());
  table.erase(key_of(1));
  CHECK_FALSE(table.find(key_of(1)).has_value());
  CHECK(table.jobs() == std::vector<job_id>{b});
}

TEST_CASE("a node's table forgets its keys past the bound, the head's keeps them", "[transport][keys]") {
  const auto job = job_id::random();
  for (const bool forgetful : {true, false}) {
    job_key_table table(forgetful);
    for (std::size_t i = 0; i < job_key_table::max_forgetful_keys; ++i) {
      table.add(key_of(static_cast<int>(i)), job);
    }
    CHECK(table.size() == job_key_table::max_forgetful_keys);
    table.add("one more", job);
    CHECK(table.find("one more") == job);
    CHECK(table.size() == (forgetful ? 1 : job_key_table::max_forgetful_keys + 1));
    CHECK(table.find(key_of(0)).has_value() == !forgetful);
  }
}

TEST_CASE("handshakes with one key ask the head once and are all answered together",
          "[transport][keys]") {
  key_lookups lookups;
  const auto now = std::chrono::steady_clock::now();
  CHECK(lookups.wait(key_of(1), request("r1", now)));        // first: ask
  CHECK_FALSE(lookups.wait(key_of(1), request("r2", now)));  // asked already
  CHECK(lookups.wait(key_of(2), request("r3", now)));
  CHECK(lookups.waiting() == 3);
  auto answered = lookups.answered(key_of(1));
  REQUIRE(answered.size() == 2);
  CHECK(answered[0].request_id == "r1");
  CHECK(answered[1].request_id == "r2");
  CHECK(lookups.answered(key_of(1)).empty());  // answered once
  CHECK(lookups.waiting() == 1);
  CHECK_FALSE(lookups.empty());
  CHECK(lookups.answered(key_of(2)).size() == 1);
  CHECK(lookups.empty());
}

TEST_CASE("handshakes the head does not answer in time expire; past the bound none wait",
          "[transport][keys]") {
  key_lookups lookups;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(lookups.wait(key_of(1), request("old", t0)));
  CHECK(lookups.wait(key_of(2), request("new", t0 + 600ms)));
  CHECK(lookups.expired(t0 + 999ms).empty());
  auto gone = lookups.expired(t0 + key_lookups::timeout);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].request_id == "old");
  CHECK(lookups.waiting() == 1);
  CHECK(lookups.expired(t0 + 600ms + key_lookups::timeout).size() == 1);
  CHECK(lookups.empty());

  for (std::size_t i = 0; i < key_lookups::max_waiting; ++i) {
    CHECK_FALSE(lookups.full());
    (void)lookups.wait(key_of(static_cast<int>(i % 7)), request("r", t0));
  }
  CHECK(lookups.full());
  CHECK(lookups.expired(t0 + key_lookups::timeout).size() == key_lookups::max_waiting);
  CHECK_FALSE(lookups.full());
}

TEST_CASE("namespace grants: a namespace job meets the jobs let into its namespace, and no other",
          "[security][detached]") {
  namespace_grants grants;
  const job_id in = job_id::random(), out = job_id::random(), admin = job_id::random();
  grants.grant(in, {"team"});
  grants.grant(admin, {std::string(namespace_grants::every)});
  const job_id team = namespace_job("team"), other = namespace_job("other");
  // Nothing is hosted yet: nobody meets anybody.
  REQUIRE_FALSE(grants.may_meet(in, team));
  grants.host("team");
  grants.host("other");
  REQUIRE(grants.hosted(team) == "team");
  REQUIRE(grants.may_meet(in, team));
  REQUIRE(grants.may_meet(team, in));
  REQUIRE(grants.may_meet(admin, other));
  REQUIRE_FALSE(grants.may_meet(in, other));
  REQUIRE_FALSE(grants.may_meet(out, team));
  REQUIRE_FALSE(grants.may_meet(in, admin));  // two plain jobs never meet
  REQUIRE(grants.may_enter(in, "team"));
  REQUIRE_FALSE(grants.may_enter(in, ""));
  REQUIRE_FALSE(grants.may_enter(out, "team"));
  grants.forget(in);
  REQUIRE_FALSE(grants.may_meet(in, team));
  grants.forget(team);
  REQUIRE_FALSE(grants.hosted(team));
  REQUIRE_FALSE(grants.may_meet(admin, team));
}
