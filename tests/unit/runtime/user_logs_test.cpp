// celer::print (core/user_logs.hpp): the dedup's policy on a made-up clock, a worker's budget
// of lines a second, the head passing lines to the job's driver only, and the whole path
// through the API: tasks and actors printing on their workers, the driver's console showing
// each line with where it came from and folding alike lines of several workers. Embedded
// and (the suite's pass against a local cluster) on a cluster.
#include "core/user_logs.hpp"
#include "fakes/memory_table_db.hpp"
#include "fakes/recording_transport.hpp"
#include "head/job_table.hpp"
#include "unit/runtime/fixtures.hpp"
#include "unit/runtime/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace celer;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

protocol::log_line line_of(const std::string& text, const worker_id& w, const std::string& fn = "step") {
  protocol::log_line l;
  l.text = text;
  l.function = fn;
  l.worker = w;
  l.node = node_id(unique_id{0x3f2a9c0100000000ULL, 1});
  l.pid = 4121;
  return l;
}

} // namespace

TEST_CASE("the log dedup prints a line once, folds alike lines of other workers, and counts them out",
          "[logs]") {
  CHECK(log_dedup::canonical("  epoch 12 loss 0.41 ") == "epoch  loss .");
  CHECK(log_dedup::canonical("123") == "");
  const worker_id a = worker_id::random(), b = worker_id::random(), c = worker_id::random();
  CHECK(log_dedup::prefix(line_of("x", a)) == "(step pid=4121 node=3f2a9c01) ");
  auto in_actor = line_of("x", a, "counter::add");
  in_actor.actor = actor_id(unique_id{0xab12cd3400000000ULL, 7});
  CHECK(log_dedup::prefix(in_actor) == "(counter::add actor=ab12cd34 pid=4121 node=3f2a9c01) ");

  log_dedup d({.dedup = true, .window = 5s});
  std::chrono::steady_clock::time_point t{};
  // One worker alone: each of its lines is printed.
  CHECK(d.add(line_of("epoch 1 loss 0.9", a), t) == "(step pid=4121 node=3f2a9c01) epoch 1 loss 0.9");
  CHECK(d.add(line_of("epoch 2 loss 0.8", a), t + 1s).has_value());
  // Another worker, alike but for digits: folded, and from then on the first one's too.
  CHECK_FALSE(d.add(line_of("epoch 1 loss 0.95", b), t + 2s));
  CHECK_FALSE(d.add(line_of("epoch 3 loss 0.7", a), t + 3s));
  CHECK_FALSE(d.add(line_of("epoch 1 loss 0.99", c), t + 3s));
  // Another line is its own.
  CHECK(d.add(line_of("saved a checkpoint", b), t + 3s).has_value());
  CHECK(d.expire(t + 4s).empty());  // the window is not over
  const auto out = d.expire(t + 5s);
  REQUIRE(out.size() == 1);
  CHECK(out[0] == "(step pid=4121 node=3f2a9c01) epoch 1 loss 0.99 [repeated 3x across cluster]");
  // A new window: printed again.
  CHECK(d.add(line_of("epoch 9 loss 0.1", b), t + 6s).has_value());
  CHECK(d.expire(t + 20s).empty());  // nothing was folded in it

  // All at once at the end; and with dedup off every line is printed.
  CHECK(d.add(line_of("done", a), t + 30s).has_value());
  CHECK_FALSE(d.add(line_of("done", b), t + 30s));
  CHECK(d.expire(t + 30s, true) == std::vector<std::string>{"(step pid=4121 node=3f2a9c01) done [repeated 1x across cluster]"});
  log_dedup off({.dedup = false, .window = 5s});
  CHECK(off.add(line_of("done", a), t).has_value());
  CHECK(off.add(line_of("done", b), t).has_value());
  CHECK(off.add(line_of("   ", b), t) == "(step pid=4121 node=3f2a9c01)    ");
}

TEST_CASE("a worker sends at most lines_per_second lines a second, and says how many it kept back", "[logs]") {
  fakes::recording_transport net;
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  user_logs logs([&] { return now; });
  const address head{unique_id::random(), "tcp://10.0.0.1:6380"};
  const job_id job = job_id::random();
  const worker_id w = worker_id::random();
  // (Each line also goes to this process's standard error, the worker's log: quiet here.)
  const int saved = ::dup(2);
  const int null = ::open("/dev/null", O_WRONLY);
  ::dup2(null, 2);
  for (std::size_t i = 0; i < user_logs::lines_per_second + 5; ++i) logs.send(net, head, job, line_of("tick", w));
  now += 1s;
  logs.send(net, head, job, line_of("after a second", w));
  // A line too long for a message is cut.
  logs.send(net, head, job, line_of(std::string(protocol::user_log::max_text + 100, 'x'), w));
  ::dup2(saved, 2);
  ::close(saved);
  ::close(null);
  auto sent = net.take<protocol::user_log>();
  REQUIRE(sent.size() == user_logs::lines_per_second + 2);
  CHECK(sent[0].first == head);
  CHECK(sent[0].second.job == job);
  const auto& last = sent[user_logs::lines_per_second].second.lines;
  REQUIRE(last.size() == 2);
  CHECK_THAT(last[0].text, Contains("5 more lines printed here went to this worker's log only"));
  CHECK(last[1].text == "after a second");
  CHECK(sent.back().second.lines[0].text.size() == protocol::user_log::max_text + 6);
}

TEST_CASE("the head passes a job's lines to that job's driver only, and drops them once the job ended",
          "[head][jobs][logs]") {
  fakes::recording_transport net;
  job_table jobs{net, nullptr, [] { return std::chrono::steady_clock::time_point{}; },
                 [](const node_id&) -> std::optional<address> { return std::nullopt; }};
  const job_id a = job_id::random(), b = job_id::random();
  const address driver_a{unique_id::random(), "tcp://10.0.0.5:5000"};
  const address driver_b{unique_id::random(), "tcp://10.0.0.6:5000"};
  protocol::user_log early{a, {line_of("before the driver spoke", worker_id::random())}};
  jobs.on(early);
  CHECK(net.take<protocol::user_log>().empty());
  protocol::job_heartbeat ha{a, {}, driver_a}, hb{b, {}, driver_b};
  jobs.on(ha);
  jobs.on(hb);
  protocol::user_log m{a, {line_of("hello", worker_id::random())}};
  m.lines.resize(protocol::user_log::max_lines + 10, m.lines[0]);
  jobs.on(m);
  auto sent = net.take<protocol::user_log>();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first == driver_a);
  CHECK(sent[0].second.job == a);
  CHECK(sent[0].second.lines.size() == protocol::user_log::max_lines);
  jobs.ended(a);
  protocol::user_log late{a, {line_of("after the end", worker_id::random())}};
  jobs.on(late);
  CHECK(net.take<protocol::user_log>().empty());
}

// ---- Through the API ----

namespace {

std::string print_from_task(std::string tag) {
  celer::print("a line from a task ", tag);
  celer::print("two lines\nat once ", tag);
  return tag;
}

struct printer {
  int ready() { return 1; }
  int say(int replica) {
    celer::print("hello from replica ", replica);
    return replica;
  }
};
printer* make_printer() { return new printer; }

CELER_REMOTE(print_from_task, make_printer, &printer::ready, &printer::say);

/// Whether `f` turns true within `limit` (asked every few milliseconds).
template <class F>
bool eventually(F f, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

/// Standard output goes to a file while it lives (the driver's console, as a person sees it).
struct captured_stdout {
  celer_test::temp_dir dir{"celer-print"};
  std::string path = (dir.path / "stdout").string();
  int saved = -1;
  captured_stdout() {
    std::fflush(stdout);
    saved = ::dup(1);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::close(fd);
  }
  ~captured_stdout() { restore(); }
  void restore() {
    if (saved < 0) return;
    std::fflush(stdout);
    ::dup2(saved, 1);
    ::close(saved);
    saved = -1;
  }
  [[nodiscard]] std::string text() const {
    std::fflush(stdout);
    std::ifstream in(path);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }
};

/// Sets an environment variable while it lives.
struct scoped_env {
  std::string name;
  scoped_env(std::string n, const char* value) : name(std::move(n)) { ::setenv(name.c_str(), value, 1); }
  ~scoped_env() { ::unsetenv(name.c_str()); }
};

} // namespace

TEST_CASE("celer::print in tasks and actors reaches the driver's console with where it came from, "
          "alike lines of several actors folded", "[api][logs]") {
  scoped_env window("CELER_LOG_DEDUP_WINDOW_MS", "2000");
  captured_stdout out;
  std::string seen;
  const std::string tag = celer::task_id::random().short_hex();
  {
    celer_test::scoped_runtime rt;
    REQUIRE(celer::get(celer::task(print_from_task).remote(tag)) == tag);
    celer::print("the driver's own line ", tag);
    std::vector<celer::actor_handle<printer>> replicas;
    for (int i = 0; i < 3; ++i) replicas.push_back(celer::actor(make_printer).remote());
    for (auto& r : replicas) REQUIRE(celer::get(r.task(&printer::ready).remote()) == 1);
    // All three at once, well within the dedup's window.
    std::vector<celer::object_ref<int>> said;
    for (int i = 0; i < 3; ++i) said.push_back(replicas[i].task(&printer::say).remote(i + 1));
    for (int i = 0; i < 3; ++i) REQUIRE(celer::get(said[i]) == i + 1);
    REQUIRE(eventually(
      [&] {
        seen = out.text();
        return seen.find("a line from a task " + tag) != std::string::npos &&
               seen.find("at once " + tag) != std::string::npos &&
               seen.find("across cluster]") != std::string::npos;
      },
      30s));
  }
  out.restore();
  INFO(seen);
  CHECK_THAT(seen, Contains("(print_from_task pid=") && Contains(") a line from a task " + tag) &&
                     Contains(") two lines\n") && Contains(") at once " + tag));
  CHECK_THAT(seen, Contains("the driver's own line " + tag + "\n"));
  CHECK(seen.find(") the driver's own line") == std::string::npos);  // no prefix: it is the driver's
  // Three actors said it alike: the first printed, the other two folded into one count.
  CHECK_THAT(seen, Contains("printer::say actor=") && Contains(") hello from replica ") &&
                     Contains("[repeated 2x across cluster]"));
  std::size_t hellos = 0;
  for (auto at = seen.find("hello from replica"); at != std::string::npos; at = seen.find("hello from replica", at + 1)) {
    ++hellos;
  }
  CHECK(hellos == 2);  // the first, and the count with the last
}

TEST_CASE("with log_to_driver = 0 the driver's console gets no worker's lines", "[api][logs]") {
  scoped_env off("CELER_LOG_TO_DRIVER", "0");
  captured_stdout out;
  std::string seen;
  {
    celer_test::scoped_runtime rt;
    const std::string tag = celer::task_id::random().short_hex();
    REQUIRE(celer::get(celer::task(print_from_task).remote(tag)) == tag);
    celer::print("the driver still prints ", tag);
  }
  seen = out.text();  // after shutdown: whatever was sent has come, or never will
  out.restore();
  CHECK_THAT(seen, Contains("the driver still prints"));
  CHECK(seen.find("a line from a task") == std::string::npos);
}
