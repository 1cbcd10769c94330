// The logger escapes what it writes: peer-supplied text cannot forge lines or reach the
// terminal as control sequences.
#include "log.hpp"

#include "captured_stderr.hpp"

#include <catch2/catch.hpp>

#include <iostream>
#include <sstream>
#include <string>

using celer::escaped_for_log;

namespace {

using celer_test::captured_stderr;

} // namespace

TEST_CASE("log escaping turns line breaks and C0 controls into visible escapes", "[log]") {
  REQUIRE(escaped_for_log("plain text: 1/2 (ok) \\ done") == "plain text: 1/2 (ok) \\ done");
  REQUIRE(escaped_for_log("a\nb\rc\td") == "a\\nb\\rc\\td");
  REQUIRE(escaped_for_log("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m");
  REQUIRE(escaped_for_log(std::string("nul\0bell\x07" "del\x7f", 13)) == "nul\\x00bell\\x07del\\x7f");
}

TEST_CASE("log escaping keeps valid UTF-8 and escapes bytes that are not", "[log]") {
  REQUIRE(escaped_for_log("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80") ==
          "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80");
  REQUIRE(escaped_for_log("\xff\xfe") == "\\xff\\xfe");
  REQUIRE(escaped_for_log("cut \xe2\x82") == "cut \\xe2\\x82");          // truncated
  REQUIRE(escaped_for_log("\xc0\xaf") == "\\xc0\\xaf");                  // overlong '/'
  REQUIRE(escaped_for_log("\xed\xa0\x80") == "\\xed\\xa0\\x80");          // a surrogate
  REQUIRE(escaped_for_log("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

TEST_CASE("log escaping shows C1 controls, line separators and bidi overrides", "[log]") {
  REQUIRE(escaped_for_log("\xc2\x9b" "2J") == "\\u{009b}2J");       // CSI
  REQUIRE(escaped_for_log("a\xe2\x80\xa8" "b") == "a\\u{2028}b");   // line separator
  REQUIRE(escaped_for_log("x\xe2\x80\xae" "y") == "x\\u{202e}y");   // right-to-left override
  REQUIRE(escaped_for_log("\xe2\x81\xa6") == "\\u{2066}");          // left-to-right isolate
}

TEST_CASE("a logged message from a peer stays on one line", "[log]") {
  const std::string from = "tcp://10.0.0.9:1\n[celer warn] head: node deadbeef is trusted\x1b]0;x\x07";
  const std::string out = captured_stderr(
    [&] { celer::log_line(celer::log_level::warn, "transport", "refused a connection from " + from); });
  REQUIRE(out ==
          "[celer warn] transport: refused a connection from tcp://10.0.0.9:1\\n[celer warn] "
          "head: node deadbeef is trusted\\x1b]0;x\\x07\n");
  REQUIRE(out.find('\n') == out.size() - 1);
}
