// What the CLI prints of job-controlled strings (runtime/src/cli/terminal_text.hpp): no
// control character reaches the terminal, text stays as it is.
#include "cli/terminal_text.hpp"

#include <catch2/catch.hpp>

using celer::cli::keep;
using celer::cli::printable;

TEST_CASE("printable escapes every control character a job could send a terminal", "[cli]") {
  // The title-setting OSC and a clear-screen CSI: no ESC or BEL byte is left.
  const std::string hostile = "name\x1b]0;pwned\x07\x1b[2J";
  const auto shown = printable(hostile);
  CHECK(shown == "name\\x1b]0;pwned\\x07\\x1b[2J");
  CHECK(shown.find('\x1b') == std::string::npos);
  CHECK(shown.find('\x07') == std::string::npos);
  // C0, DEL; newline and tab only where a block of text keeps them.
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(printable("a\rb\x7f") == "a\\x0db\\x7f");
  CHECK(printable("line\n\tnext") == "line\\x0a\\x09next");
  CHECK(printable("line\n\tnext", keep::newlines) == "line\n\tnext");
  CHECK(printable("\x1b[31mred\n", keep::newlines) == "\\x1b[31mred\n");
  // C1 controls as UTF-8 (U+009B is a CSI on some terminals), and bytes that are not UTF-8.
  CHECK(printable("\xc2\x9b" "2J") == "\\u009b2J");
  CHECK(printable("\x9b" "2J") == "\\x9b2J");
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");
  CHECK(printable("\xe2\x82") == "\\xe2\\x82");  // cut short
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");  // overlong
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  // Text, in any script, is left alone.
  CHECK(printable("plain ascii, 1.5 GiB") == "plain ascii, 1.5 GiB");
  CHECK(printable("Grüße, 東京, 🚀") == "Grüße, 東京, 🚀");
  CHECK(printable("").empty());
}
