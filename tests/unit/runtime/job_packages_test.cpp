// A submitted job's working directory on every node (docs/jobs.md): the head hands a job's
// package only to a registered node asking for that job; a node fetches it once, unpacks it,
// and only then starts the job's workers (or fails them with why); a program inside the
// folder is named relative to its root.
#include "cluster/process_wiring.hpp"
#include "fakes/recording_transport.hpp"
#include "head/head.hpp"
#include "jobs/package.hpp"
#include "node/node_agent.hpp"
#include "unit/runtime/temp_dir.hpp"

#include <celer/version.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace celer;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {
using celer_test::temp_dir;

/// A package of a folder holding bin/app and data/input.txt.
std::string sample_package(const fs::path& scratch) {
  const auto src = scratch / "src";
  fs::create_directories(src / "bin");
  fs::create_directories(src / "data");
  std::ofstream(src / "bin" / "app") << "#!/bin/sh\n";
  std::ofstream(src / "data" / "input.txt") << "hello\n";
  auto archive = jobs::pack_directory(src);
  REQUIRE(archive);
  return *archive;
}

struct node_fixture {
  temp_dir dir;
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  address head{unique_id::random(), {}};
  node_agent node;

  node_fixture() : node(net, launcher, make_config(head, dir.path / "workdirs")) {
    launcher.as_processes = true;
    node.start();
    (void)net.take<protocol::register_node>();
  }
  static node_agent::config make_config(const address& head, const fs::path& packages) {
    node_agent::config c;
    c.id = node_id::random();
    c.self = address{c.id, {}};
    c.head = head;
    c.total = *protocol::make_request(4, 0, 0, {});
    c.packages_dir = packages;
    return c;
  }
  protocol::task_spec task(const std::string& package) {
    protocol::task_spec s;
    s.id = task_id::random();
    s.function = "f";
    s.job = job;
    s.owner = address{unique_id::random(), "tcp://10.0.0.9:1"};
    s.resources = *protocol::make_request(1, 0, 0, {});
    s.package = package;
    s.binary = "bin/app";
    return s;
  }
  void handle(protocol::message m) { node.handle(m); }
  job_id job = job_id::random();
};

} // namespace

TEST_CASE("a package is unpacked once per machine, and only bytes that match its digest",
          "[package][jobs]") {
  temp_dir t;
  const auto archive = sample_package(t.path);
  const auto digest = jobs::package_digest(archive);
  jobs::package_cache cache(t.path / "cache");
  REQUIRE_FALSE(cache.ready(digest));

  auto damaged = archive;
  damaged[damaged.size() / 2] ^= 1;
  auto refused = cache.install(digest, damaged);
  REQUIRE_FALSE(refused);
  REQUIRE(refused.error().code() == error_code::data_loss);
  REQUIRE_FALSE(cache.ready(digest));

  REQUIRE(cache.install(digest, archive));
  REQUIRE(cache.ready(digest));
  REQUIRE(fs::is_regular_file(cache.path(digest) / "data" / "input.txt"));
  REQUIRE(cache.install(digest, archive));  // already there: nothing to do

  auto bad_name = cache.install("../../etc", archive);
  REQUIRE_FALSE(bad_name);
  REQUIRE(bad_name.error().code() == error_code::invalid_argument);
  REQUIRE_FALSE(jobs::is_package_digest("0123456789ABCDEF0123456789abcdef"));
  REQUIRE(jobs::is_package_digest(digest));
}

TEST_CASE("the head sends a job's package only to a registered node, and says why not",
          "[package][jobs][head]") {
  fakes::recording_transport net;
  head h{net};
  const job_id job = job_id::random();
  const std::string digest(32, 'a');
  std::vector<std::pair<job_id, std::string>> asked;
  h.serve_packages([&](const job_id& j, const std::string& d) -> expected<std::string> {
    asked.emplace_back(j, d);
    if (j != job) return error(error_code::not_found, "job was not submitted with working directory " + d);
    return std::string("ARCHIVE");
  });
  const node_id n = node_id::random();
  const address node_addr{n, "tcp://10.0.0.1:7"};
  protocol::register_node r;
  r.protocol_version = protocol_version;
  r.node = n;
  r.node_address = node_addr;
  r.total = *protocol::make_request(2, 0, 0, {});
  protocol::message m = r;
  h.handle(m);

  protocol::message stranger = protocol::package_fetch{digest, job, node_id::random()};
  h.handle(stranger);
  REQUIRE(net.take<protocol::package_data>().empty());  // an unknown node gets nothing
  REQUIRE(asked.empty());

  protocol::message fetch = protocol::package_fetch{digest, job, n};
  h.handle(fetch);
  auto sent = net.take<protocol::package_data>();
  REQUIRE(sent.size() == 1);
  REQUIRE(sent[0].first == node_addr);
  REQUIRE(sent[0].second.digest == digest);
  REQUIRE(std::string(sent[0].second.archive) == "ARCHIVE");
  REQUIRE(sent[0].second.error.empty());

  protocol::message other = protocol::package_fetch{digest, job_id::random(), n};
  h.handle(other);
  sent = net.take<protocol::package_data>();
  REQUIRE(sent.size() == 1);
  REQUIRE(sent[0].second.archive.empty());
  REQUIRE_THAT(sent[0].second.error, Contains("not submitted with"));
}

TEST_CASE("a node fetches a job's working directory once, then starts the workers that waited",
          "[package][jobs][node]") {
  node_fixture f;
  const auto archive = sample_package(f.dir.path);
  const auto digest = jobs::package_digest(archive);

  auto first = f.task(digest), second = f.task(digest);
  f.handle(protocol::request_lease{first, false});
  f.handle(protocol::request_lease{second, false});
  auto fetches = f.net.take<protocol::package_fetch>();
  REQUIRE(fetches.size() == 1);  // one fetch for both
  REQUIRE(fetches[0].first == f.head);
  REQUIRE(fetches[0].second.digest == digest);
  REQUIRE(fetches[0].second.job == f.job);
  REQUIRE(f.launcher.launched_ids.empty());  // nothing starts before its folder is here
  REQUIRE(f.node.workers() == 2);

  f.handle(protocol::package_data{digest, archive, {}, f.job});
  REQUIRE(fs::is_regular_file(f.dir.path / "workdirs" / digest / "bin" / "app"));
  REQUIRE(f.launcher.launched_ids.size() == 2);

  // Once here, the next worker of the job starts at once.
  f.handle(protocol::request_lease{f.task(digest), false});
  REQUIRE(f.net.take<protocol::package_fetch>().empty());
  REQUIRE(f.launcher.launched_ids.size() == 3);
}

TEST_CASE("workers waiting for a working directory that cannot come fail with why, and the "
          "next asks again",
          "[package][jobs][node]") {
  node_fixture f;
  const std::string digest(32, 'b');
  auto spec = f.task(digest);
  f.handle(protocol::request_lease{spec, false});
  REQUIRE(f.net.take<protocol::package_fetch>().size() == 1);

  f.handle(protocol::package_data{digest, {}, "job was not submitted with working directory " + digest, f.job});
  auto replies = f.net.take<protocol::lease_reply>();
  REQUIRE(replies.size() == 1);
  REQUIRE(replies[0].first == spec.owner);
  REQUIRE(replies[0].second.request == spec.id);
  REQUIRE_FALSE(replies[0].second.ok);
  REQUIRE_THAT(replies[0].second.fail.message, Contains("working directory " + digest + " did not arrive"));
  REQUIRE_THAT(replies[0].second.fail.message, Contains("not submitted with"));
  REQUIRE(f.launcher.launched_ids.empty());
  REQUIRE(f.node.workers() == 0);
  REQUIRE(f.node.available().get(protocol::cpu) == 4);  // its CPU is free again

  // Bytes that do not match the digest are refused the same way.
  f.handle(protocol::request_lease{f.task(digest), false});
  REQUIRE(f.net.take<protocol::package_fetch>().size() == 1);
  f.handle(protocol::package_data{digest, std::string("not an archive"), {}, f.job});
  replies = f.net.take<protocol::lease_reply>();
  REQUIRE(replies.size() == 1);
  REQUIRE_THAT(replies[0].second.fail.message, Contains("do not match its digest"));
}

TEST_CASE("a program inside the job's working directory is named from its root",
          "[package][jobs]") {
  temp_dir t;
  fs::create_directories(t.path / "wd" / "bin");
  std::ofstream(t.path / "wd" / "bin" / "app") << "x";
  std::ofstream(t.path / "outside") << "x";
  REQUIRE(cluster::package_binary((t.path / "wd" / "bin" / "app").string(), (t.path / "wd").string()) == "bin/app");
  REQUIRE(cluster::package_binary((t.path / "wd" / "bin" / "app").string(), (t.path / "wd/").string()) == "bin/app");
  const auto outside = (t.path / "outside").string();
  REQUIRE(cluster::package_binary(outside, (t.path / "wd").string()) == outside);
  REQUIRE(cluster::package_binary("/usr/bin/env", (t.path / "wd").string()) == "/usr/bin/env");
}

TEST_CASE("a worker whose job ends while its working directory is fetched is never started",
          "[package][jobs][node]") {
  node_fixture f;
  const auto archive = sample_package(f.dir.path);
  const auto digest = jobs::package_digest(archive);
  f.handle(protocol::request_lease{f.task(digest), false});
  REQUIRE(f.net.take<protocol::package_fetch>().size() == 1);
  f.handle(protocol::job_finished{f.job});
  REQUIRE(f.node.workers() == 0);
  REQUIRE(f.net.take<protocol::shutdown_component>().empty());  // no process to tell
  f.handle(protocol::package_data{digest, archive, {}, f.job});
  REQUIRE(f.launcher.launched_ids.empty());
  REQUIRE(f.node.available().get(protocol::cpu) == 4);
}

TEST_CASE("a job cannot start in another job's unpacked working directory by naming its digest",
          "[package][jobs][node][security]") {
  node_fixture f;
  const auto archive = sample_package(f.dir.path);
  const auto digest = jobs::package_digest(archive);
  f.handle(protocol::request_lease{f.task(digest), false});
  REQUIRE(f.net.take<protocol::package_fetch>().size() == 1);
  f.handle(protocol::package_data{digest, archive, {}, f.job});
  REQUIRE(f.launcher.launched_ids.size() == 1);

  // Another job names the same digest: the copy is here, but the head is asked whether
  // that job was submitted with it, and nothing starts until it says so.
  const job_id other = job_id::random();
  auto spec = f.task(digest);
  spec.job = other;
  f.handle(protocol::request_lease{spec, false});
  auto asked = f.net.take<protocol::package_fetch>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].second.job == other);
  CHECK(asked[0].second.unpacked);
  REQUIRE(f.launcher.launched_ids.size() == 1);
  f.handle(protocol::package_data{digest, {}, "job was not submitted with working directory " + digest, other});
  auto replies = f.net.take<protocol::lease_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].second.request == spec.id);
  CHECK_FALSE(replies[0].second.ok);
  CHECK_THAT(replies[0].second.fail.message, Contains("not submitted with"));
  REQUIRE(f.launcher.launched_ids.size() == 1);

  // A reply for another job than the one that asked changes nothing.
  spec = f.task(digest);
  spec.job = other;
  f.handle(protocol::request_lease{spec, false});
  REQUIRE(f.net.take<protocol::package_fetch>().size() == 1);
  f.handle(protocol::package_data{digest, {}, {}, f.job});
  REQUIRE(f.launcher.launched_ids.size() == 1);
  // The head's yes for that job (no archive: the node has it) starts its worker.
  f.handle(protocol::package_data{digest, {}, {}, other});
  REQUIRE(f.launcher.launched_ids.size() == 2);
}

TEST_CASE("the head answers a node that has a package unpacked with whether the job may use it, "
          "without the archive",
          "[package][jobs][head][security]") {
  fakes::recording_transport net;
  head h{net};
  const job_id job = job_id::random();
  const std::string digest(32, 'a');
  h.serve_packages([&](const job_id& j, const std::string& d) -> expected<std::string> {
    if (j != job) return error(error_code::not_found, "job was not submitted with working directory " + d);
    return std::string("ARCHIVE");
  });
  const node_id n = node_id::random();
  protocol::register_node r;
  r.protocol_version = protocol_version;
  r.node = n;
  r.node_address = address{n, "tcp://10.0.0.1:7"};
  r.total = *protocol::make_request(2, 0, 0, {});
  protocol::message m = r;
  h.handle(m);

  protocol::message yes = protocol::package_fetch{digest, job, n, /*unpacked=*/true};
  h.handle(yes);
  auto sent = net.take<protocol::package_data>();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].second.job == job);
  CHECK(sent[0].second.archive.empty());
  CHECK(sent[0].second.error.empty());
  const job_id other = job_id::random();
  protocol::message no = protocol::package_fetch{digest, other, n, /*unpacked=*/true};
  h.handle(no);
  sent = net.take<protocol::package_data>();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].second.job == other);
  CHECK_THAT(sent[0].second.error, Contains("not submitted with"));
}

TEST_CASE("the node's package fetcher on its own: one fetch for many waiters, bound per job, asked again after a "
          "give-up",
          "[jobs][packages]") {
  temp_dir dir;
  fakes::recording_transport net;
  const address head{unique_id::random(), {}};
  const node_id node = node_id::random();
  package_fetcher packages(net, head, node, dir.path / "workdirs");
  const auto archive = sample_package(dir.path);
  const auto digest = jobs::package_digest(archive);
  const job_id mine = job_id::random(), other = job_id::random();
  const worker_id w1 = worker_id::random(), w2 = worker_id::random(), w3 = worker_id::random();

  CHECK_FALSE(packages.must_wait(mine, ""));  // work naming no package starts at once
  REQUIRE(packages.must_wait(mine, digest));
  packages.wait(mine, digest, w1);
  packages.wait(mine, digest, w2);
  auto asks = net.take<protocol::package_fetch>();
  REQUIRE(asks.size() == 1);  // one fetch for both
  CHECK(asks[0].first == head);
  CHECK(asks[0].second.node == node);
  CHECK_FALSE(asks[0].second.unpacked);
  protocol::package_data data{digest, archive, "", mine};
  auto answer = packages.on(data);
  CHECK(answer.why.empty());
  CHECK(answer.workers == std::vector<worker_id>{w1, w2});
  CHECK_FALSE(packages.must_wait(mine, digest));
  // Unpacked here, but bound to `mine` only: another job asks the head first.
  CHECK(packages.must_wait(other, digest));
  packages.wait(other, digest, w3);
  asks = net.take<protocol::package_fetch>();
  REQUIRE(asks.size() == 1);
  CHECK(asks[0].second.unpacked);
  packages.gave_up(other, digest, w3);
  protocol::package_data late{digest, "", "", other};
  CHECK(packages.on(late).workers.empty());  // nobody waits any more
  packages.wait(other, digest, w3);
  CHECK(net.take<protocol::package_fetch>().size() == 1);  // asked again
  protocol::package_data refused{digest, "", "job " + other.short_hex() + " was not submitted with it", other};
  answer = packages.on(refused);
  CHECK(answer.workers == std::vector<worker_id>{w3});
  CHECK_THAT(answer.why, Contains("was not submitted with it"));
  // A job's binding ends with it.
  packages.job_finished(mine);
  CHECK(packages.must_wait(mine, digest));
}
