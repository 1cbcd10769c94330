// The Prometheus text writer (runtime/src/http/prometheus.hpp): the format's lines, its
// escapes, and promtool's verdict on what it writes.
#include "http/prometheus.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include <unistd.h>

using namespace celer::prometheus;

TEST_CASE("families carry HELP and TYPE, samples their labels, values in the format's spelling", "[http][prometheus]") {
  exposition e;
  e.gauge("celer_nodes", "Nodes by state", {{{{"state", "alive"}}, 3}, {{{"state", "dead"}}, 0}});
  e.counter("celer_http_responses_total", "Responses\nby code", {{{{"code", "200"}}, 17}});
  e.gauge("celer_ratio", "A ratio", {{{}, 0.25}});
  CHECK(e.text() ==
        "# HELP celer_nodes Nodes by state\n# TYPE celer_nodes gauge\n"
        "celer_nodes{state=\"alive\"} 3\nceler_nodes{state=\"dead\"} 0\n"
        "# HELP celer_http_responses_total Responses\\nby code\n# TYPE celer_http_responses_total counter\n"
        "celer_http_responses_total{code=\"200\"} 17\n"
        "# HELP celer_ratio A ratio\n# TYPE celer_ratio gauge\nceler_ratio 0.25\n");
  CHECK(format_value(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_value(25276502016.0) == "25276502016");
  CHECK(escape_label("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
}

TEST_CASE("a histogram has cumulative buckets, +Inf, sum and count", "[http][prometheus]") {
  exposition e;
  e.histogram("celer_schedule_seconds", "Scheduling latency", {{"job", "1"}}, {0.001, 0.01}, {4, 9}, 0.05, 10);
  CHECK(e.text() ==
        "# HELP celer_schedule_seconds Scheduling latency\n# TYPE celer_schedule_seconds histogram\n"
        "celer_schedule_seconds_bucket{job=\"1\",le=\"0.001\"} 4\n"
        "celer_schedule_seconds_bucket{job=\"1\",le=\"0.01\"} 9\n"
        "celer_schedule_seconds_bucket{job=\"1\",le=\"+Inf\"} 10\n"
        "celer_schedule_seconds_sum{job=\"1\"} 0.050000000000000003\n"
        "celer_schedule_seconds_count{job=\"1\"} 10\n");
}

TEST_CASE("bad names and a family written twice are programming errors", "[http][prometheus]") {
  exposition e;
  CHECK_THROWS_AS(e.gauge("9lives", "x", {}), std::invalid_argument);
  CHECK_THROWS_AS(e.gauge("has-dash", "x", {}), std::invalid_argument);
  CHECK_THROWS_AS(e.gauge("ok", "x", {{{{"bad-label", "v"}}, 1}}), std::invalid_argument);
  e.gauge("once", "x", {});
  CHECK_THROWS_AS(e.counter("once", "x", {}), std::invalid_argument);
}

TEST_CASE("promtool accepts what the writer writes, label values with quotes and newlines included", "[http][prometheus]") {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    WARN("promtool is not installed (scripts/install-deps.sh installs prometheus): skipped");
    return;
  }
  exposition e;
  e.gauge("celer_node_up", "1 while the node is alive", {{{{"node", "63085b84"}}, 1}, {{{"node", "a\"b\\c\nd"}}, 0}});
  e.counter("celer_object_store_spilled_bytes_total", "Bytes spilled", {{{{"node", "63085b84"}}, 1e12}});
  e.histogram("celer_schedule_seconds", "Scheduling latency", {}, {0.001, 0.01, 0.1}, {1, 5, 7}, 0.2, 8);
  e.gauge("celer_gpu_temperature_celsius", "Temperature", {{{{"gpu", "0"}}, std::numeric_limits<double>::quiet_NaN()}});
  char path[] = "/tmp/celer-prom.XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << e.text();
  const int rc = std::system(("promtool check metrics < " + std::string(path) + " > /dev/null 2>&1").c_str());
  std::remove(path);
  CHECK(rc == 0);
}
