// celer::trainer's metrics on disk: CRC-32C, TensorBoard event files (written, then read
// back with every CRC checked), and JSON Lines.
#include <celer/actors/trainer/metrics_log.hpp>

#include "checkpoint_fixtures.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <random>
#include <unistd.h>

using namespace celer::trainer;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

using checkpoint_test::temp_dir;  // a fresh folder, removed at the end

/// A wall clock the test moves by hand, starting at 1717171717.5 s.
struct fake_clock {
  std::shared_ptr<std::chrono::system_clock::time_point> t =
    std::make_shared<std::chrono::system_clock::time_point>(
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1717171717500)));
  [[nodiscard]] wall_clock fn() const {
    return [now = t] { return *now; };
  }
  void advance(std::chrono::milliseconds d) const { *t += d; }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string le(std::uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}

/// A TFRecord around `data`, framed here independently of the writer.
std::string tfrecord(const std::string& data) {
  const std::string len = le(data.size(), 8);
  return len + le(mask_crc(crc32c(len)), 4) + data + le(mask_crc(crc32c(data)), 4);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::size_t events_on_disk(const std::string& path) {
  auto c = read_event_file(path);
  REQUIRE(c);
  return c->events.size();
}

} // namespace

TEST_CASE("CRC-32C gives the standard check value and continues across pieces", "[trainer][metrics]") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  CHECK(crc32c("6789", 4, crc32c("12345")) == 0xE3069283u);
  // 32 zero bytes: RFC 3720's (iSCSI) test vector.
  const std::string zeros(32, '\0');
  CHECK(crc32c(zeros) == 0x8A9136AAu);
  CHECK(mask_crc(0) == 0xa282ead8u);
  CHECK(mask_crc(0x80000000u) == 0xa282ead8u + (1u << 16));
}

TEST_CASE("an event file holds TFRecords of hand-encoded Events, byte for byte",
          "[trainer][metrics]") {
  temp_dir dir;
  fake_clock clock;
  auto w = event_file_writer::open(
    {.dir = (dir.path / "tb").string(), .clock = clock.fn(), .hostname = "trainer/7"});
  REQUIRE(w);
  CHECK(fs::path(w->path()).filename() == "events.out.tfevents.1717171717.trainer_7");
  REQUIRE(w->add_scalar("loss", /*step=*/3, 0.5));
  REQUIRE(w->close());

  const std::string wall = le(std::bit_cast<std::uint64_t>(1717171717.5), 8);
  // Event { wall_time (1, fixed64); file_version (3, bytes) = "brain.Event:2" }
  const std::string version = "\x09" + wall + "\x1a\x0d" "brain.Event:2";
  // Event { wall_time; step (2, varint) = 3;
  //         summary (5) = Summary { value (1) = Value { tag (1) = "loss"; simple_value (2, fixed32) = 0.5f } } }
  const std::string value = std::string("\x0a\x04" "loss" "\x15", 7) + le(std::bit_cast<std::uint32_t>(0.5f), 4);
  const std::string summary = "\x0a" + std::string(1, static_cast<char>(value.size())) + value;
  const std::string scalar_event =
    "\x09" + wall + "\x10\x03" + "\x2a" + std::string(1, static_cast<char>(summary.size())) + summary;
  CHECK(slurp(w->path()) == tfrecord(version) + tfrecord(scalar_event));
}

TEST_CASE("an event file reads back with every CRC checked and every field decoded",
          "[trainer][metrics]") {
  temp_dir dir;
  fake_clock clock;
  auto w = event_file_writer::open({.dir = dir.path.string(), .clock = clock.fn()});
  REQUIRE(w);
  REQUIRE(w->add_scalar("loss", 0, 2.25));
  clock.advance(1500ms);
  const scalar step_figures[] = {{"loss", 1.125}, {"train/samples_per_s", 4096}, {"δ grad norm", -0.25}};
  REQUIRE(w->add_scalars(1, step_figures));
  REQUIRE(w->add_scalar("big_step", std::int64_t{1} << 40, 1e30));
  REQUIRE(w->add_scalar("negative_step", -5, std::numeric_limits<double>::quiet_NaN()));
  CHECK(w->records() == 5);
  REQUIRE(w->close());
  CHECK(w->close());  // twice is fine

  auto back = read_event_file(w->path());
  REQUIRE(back);
  CHECK_FALSE(back->truncated);
  REQUIRE(back->events.size() == 5);
  const auto& e = back->events;
  CHECK(e[0].file_version == "brain.Event:2");
  CHECK(e[0].wall_time == 1717171717.5);
  CHECK(e[0].values.empty());
  CHECK(e[1].file_version.empty());
  CHECK(e[1].step == 0);
  REQUIRE(e[1].values.size() == 1);
  CHECK(e[1].values[0].tag == "loss");
  CHECK(e[1].values[0].value == 2.25);
  CHECK(e[2].wall_time == 1717171719.0);
  CHECK(e[2].step == 1);
  REQUIRE(e[2].values.size() == 3);
  CHECK(e[2].values[1].tag == "train/samples_per_s");
  CHECK(e[2].values[1].value == 4096);
  CHECK(e[2].values[2].tag == "δ grad norm");
  CHECK(e[2].values[2].value == -0.25);
  CHECK(e[3].step == std::int64_t{1} << 40);
  CHECK(e[3].values[0].value == static_cast<double>(1e30f));  // simple_value is a float
  CHECK(e[4].step == -5);
  CHECK(std::isnan(e[4].values[0].value));
}

TEST_CASE("event and JSONL writers flush every N records, after T seconds, and on close",
          "[trainer][metrics]") {
  temp_dir dir;
  fake_clock clock;
  const flush_policy policy{.every_records = 3, .every = 10s};
  auto tb = event_file_writer::open({.dir = dir.path.string(), .flush = policy, .clock = clock.fn()});
  auto jl = jsonl_writer::open(
    {.path = (dir.path / "run" / "metrics.jsonl").string(), .flush = policy, .clock = clock.fn()});
  REQUIRE(tb);
  REQUIRE(jl);
  // The file_version record is written at once: TensorBoard finds the file by it.
  CHECK(events_on_disk(tb->path()) == 1);
  const auto step = [&](std::int64_t s) {
    const scalar figures[] = {{"loss", 1.0 / static_cast<double>(s + 1)}};
    REQUIRE(tb->add_scalars(s, figures));
    REQUIRE(jl->write(s, figures));
  };
  step(0);
  step(1);
  CHECK(events_on_disk(tb->path()) == 1);
  CHECK(lines_of(jl->path()).empty());
  step(2);  // the third record
  CHECK(events_on_disk(tb->path()) == 4);
  CHECK(lines_of(jl->path()).size() == 3);
  clock.advance(9s);
  step(3);
  CHECK(events_on_disk(tb->path()) == 4);
  clock.advance(1s);
  step(4);  // 10 s after the last write
  CHECK(events_on_disk(tb->path()) == 6);
  CHECK(lines_of(jl->path()).size() == 5);
  step(5);
  REQUIRE(tb->flush());
  CHECK(events_on_disk(tb->path()) == 7);
  step(6);
  REQUIRE(tb->close());
  REQUIRE(jl->close());
  CHECK(events_on_disk(tb->path()) == 8);
  CHECK(lines_of(jl->path()).size() == 7);
  // Closed writers refuse more.
  auto late = tb->add_scalar("loss", 7, 0.1);
  REQUIRE_FALSE(late);
  CHECK(late.error().code() == celer::error_code::failed_precondition);
  CHECK_FALSE(jl->write(7, {}));
}

TEST_CASE("a truncated last record is skipped and a damaged one is data_loss", "[trainer][metrics]") {
  temp_dir dir;
  std::string path;
  {
    auto w = event_file_writer::open({.dir = dir.path.string()});
    REQUIRE(w);
    for (int s = 1; s <= 3; ++s) REQUIRE(w->add_scalar("loss", s, 1.0 / s));
    path = w->path();
  }  // the destructor closes
  const std::string whole = slurp(path);
  REQUIRE(events_on_disk(path) == 4);

  const auto rewrite = [&](const std::string& bytes) { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; };
  rewrite(whole.substr(0, whole.size() - 5));  // inside the last record's data
  auto cut = read_event_file(path);
  REQUIRE(cut);
  CHECK(cut->truncated);
  CHECK(cut->events.size() == 3);
  rewrite(whole.substr(0, whole.size() - 30 - 7));  // inside a length header
  cut = read_event_file(path);
  REQUIRE(cut);
  CHECK(cut->truncated);

  std::string flipped = whole;
  flipped[flipped.size() - 10] = static_cast<char>(flipped[flipped.size() - 10] ^ 0x01);
  rewrite(flipped);
  auto bad = read_event_file(path);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == celer::error_code::data_loss);
  CHECK_THAT(bad.error().message(), Catch::Contains("record 3") && Catch::Contains("CRC of its data"));
  flipped = whole;
  flipped[2] = '\x7f';  // the first record's length
  rewrite(flipped);
  bad = read_event_file(path);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message(), Catch::Contains("record 0 at byte 0") && Catch::Contains("CRC of its length"));

  auto missing = read_event_file((dir.path / "nothing").string());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == celer::error_code::not_found);
}

TEST_CASE("metrics writers refuse bad tags and options and never overwrite a file",
          "[trainer][metrics]") {
  temp_dir dir;
  fake_clock clock;
  CHECK(event_file_writer::open({}).error().code() == celer::error_code::invalid_argument);
  CHECK(jsonl_writer::open({}).error().code() == celer::error_code::invalid_argument);
  auto zero = event_file_writer::open({.dir = dir.path.string(), .flush = {.every_records = 0}});
  REQUIRE_FALSE(zero);
  CHECK_THAT(zero.error().message(), Catch::Contains("every_records"));

  // A folder where a file is: the error names the path.
  std::ofstream(dir.path / "file") << "x";
  auto blocked = event_file_writer::open({.dir = (dir.path / "file" / "tb").string()});
  REQUIRE_FALSE(blocked);
  CHECK_THAT(blocked.error().message(), Catch::Contains((dir.path / "file").string()));

  auto first = event_file_writer::open({.dir = dir.path.string(), .clock = clock.fn(), .hostname = "h"});
  auto second = event_file_writer::open({.dir = dir.path.string(), .clock = clock.fn(), .hostname = "h"});
  REQUIRE(first);
  REQUIRE(second);
  CHECK(fs::path(second->path()).filename() == "events.out.tfevents.1717171717.h.1");

  CHECK(first->add_scalar("", 1, 1.0).error().code() == celer::error_code::invalid_argument);
  CHECK_THAT(first->add_scalar("bad\xff", 1, 1.0).error().message(), Catch::Contains("UTF-8"));
  CHECK_THAT(first->add_scalar("\xc0\xaf", 1, 1.0).error().message(), Catch::Contains("UTF-8"));  // overlong
  CHECK_THAT(first->add_scalars(1, {}).error().message(), Catch::Contains("no values"));

  auto jl = jsonl_writer::open({.path = (dir.path / "m.jsonl").string()});
  REQUIRE(jl);
  const scalar named_step[] = {{"step", 1}};
  const scalar twice[] = {{"loss", 1}, {"loss", 2}};
  const scalar not_utf8[] = {{"\xe2\x82", 1}};
  CHECK_THAT(jl->write(1, named_step).error().message(), Catch::Contains("column of its own"));
  CHECK_THAT(jl->write(1, twice).error().message(), Catch::Contains("appears twice"));
  CHECK_THAT(jl->write(1, not_utf8).error().message(), Catch::Contains("UTF-8"));
  REQUIRE(jl->close());
  CHECK(lines_of(jl->path()).empty());  // refused rows leave nothing behind
}

TEST_CASE("the JSONL writer writes one object per step: integers, reals and nulls, in order",
          "[trainer][metrics]") {
  temp_dir dir;
  fake_clock clock;
  const std::string path = (dir.path / "metrics.jsonl").string();
  {
    auto jl = jsonl_writer::open({.path = path, .clock = clock.fn()});
    REQUIRE(jl);
    const scalar figures[] = {{"loss", 0.3125},
                              {"bytes_sent", 131104},
                              {"grad_norm", std::numeric_limits<double>::infinity()},
                              {"say \"hi\"\n", 1e300}};
    REQUIRE(jl->write(12, figures));
  }
  auto lines = lines_of(path);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        R"({"step":12,"wall_time":1717171717.5,"loss":0.3125,"bytes_sent":131104,"grad_norm":null,"say \"hi\"\n":1e+300})");
  const auto row = nlohmann::json::parse(lines[0]);
  CHECK(row["bytes_sent"].is_number_integer());
  CHECK(row["loss"].get<double>() == 0.3125);

  // Appending (a resumed run) goes on in the same file; append = false starts it again.
  {
    auto jl = jsonl_writer::open({.path = path, .clock = clock.fn()});
    REQUIRE(jl);
    const scalar figures[] = {{"loss", 0.25}};
    REQUIRE(jl->write(13, figures));
  }
  CHECK(lines_of(path).size() == 2);
  {
    auto jl = jsonl_writer::open({.path = path, .append = false, .clock = clock.fn()});
    REQUIRE(jl);
  }
  CHECK(lines_of(path).empty());
}

TEST_CASE("the JSONL writer puts text columns before the figures, as JSON strings", "[trainer][metrics]") {
  temp_dir dir;
  fake_clock clock;
  const std::string path = (dir.path / "metrics.jsonl").string();
  {
    auto jl = jsonl_writer::open({.path = path, .clock = clock.fn()});
    REQUIRE(jl);
    const text_field texts[] = {{"mode", "async"}};
    const scalar figures[] = {{"loss", 0.5}};
    REQUIRE(jl->write(3, texts, figures));
    // A tag may not repeat across the two lists, and a text must be UTF-8.
    const text_field twice[] = {{"loss", "x"}};
    CHECK(jl->write(4, twice, figures).error().code() == celer::error_code::invalid_argument);
    const text_field bad[] = {{"mode", std::string("\xff")}};
    CHECK_THAT(jl->write(4, bad, figures).error().message(), Catch::Contains("not UTF-8"));
  }
  auto lines = lines_of(path);
  REQUIRE(lines.size() == 1);  // the refused rows left nothing
  CHECK(lines[0] == R"({"step":3,"wall_time":1717171717.5,"mode":"async","loss":0.5})");
}

// Not run by default (hidden): writes an event file for bench/peers/tensorboard_read_events.py
// to read with TensorBoard's own reader, into $CELER_TFEVENTS_DIR.
TEST_CASE("write a sample event file for TensorBoard's own reader", "[.][tensorboard_manual]") {
  const char* out = std::getenv("CELER_TFEVENTS_DIR");
  REQUIRE(out != nullptr);
  auto w = event_file_writer::open({.dir = out});
  REQUIRE(w);
  for (std::int64_t step = 0; step < 100; ++step) {
    const scalar figures[] = {{"loss", 2.0 / static_cast<double>(step + 1)},
                              {"train/samples_per_s", 1000.0 + static_cast<double>(step)}};
    REQUIRE(w->add_scalars(step, figures));
  }
  REQUIRE(w->close());
  std::cout << w->path() << "\n";
}
