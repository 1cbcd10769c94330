// <celer/apps/config_schema.hpp>: one declaration per key gives the YAML reader, the flags,
// --help, the choices and run.json.
#define CATCH_CONFIG_MAIN
#include <celer/apps/config_schema.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cctype>
#include <type_traits>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using Catch::Matchers::Contains;
namespace apps = celer::apps;

struct demo_config {
  std::string name = "run";
  int num_workers = 2;
  double lr = 0.01;
  std::string mode = "sync";
  std::vector<double> speeds;
  std::uint64_t seed = 1;
  bool verbose = false;
};

const apps::config_schema<demo_config>& schema() {
  using c = demo_config;
  static const apps::config_schema<demo_config> s{{
    apps::field("name", &c::name, "the run's name"),
    apps::field("num_workers", &c::num_workers, "worker actors"),
    apps::field("lr", &c::lr, "learning rate"),
    apps::field("mode", &c::mode, "sync | async").one_of({"sync", "async", "hybrid"}, "hybrid switches"),
    apps::list_field("speeds", &c::speeds, "each worker's speed"),
    apps::field("seed", &c::seed, "the seed").no_flag(),
    apps::field("verbose", &c::verbose, "say more"),
  }};
  return s;
}

/// Parses `args` (without the program's name) with the schema's flags on `flags`.
void parse(CLI::App& cli, const std::vector<std::string>& args, demo_config& flags) {
  schema().add_flags(cli, flags);
  std::vector<const char*> argv{"demo"};
  for (const auto& a : args) argv.push_back(a.c_str());
  cli.parse(static_cast<int>(argv.size()), argv.data());
}

} // namespace

TEST_CASE("a config schema reads each declared key from YAML over the defaults", "[apps_common]") {
  auto c = schema().parse("num_workers: 4\nmode: async\nspeeds: [3, 1]\nverbose: true\n", "a.yaml");
  REQUIRE(c);
  CHECK(c->num_workers == 4);
  CHECK(c->mode == "async");
  CHECK(c->speeds == std::vector<double>{3, 1});
  CHECK(c->verbose);
  CHECK(c->lr == 0.01);  // not in the file: its default
  CHECK(c->name == "run");
  auto empty = schema().parse("", "empty.yaml");
  REQUIRE(empty);
  CHECK(empty->num_workers == 2);
}

TEST_CASE("a misspelt key names the file, the line and the nearest key", "[apps_common]") {
  auto c = schema().parse("lr: 0.1\nnum_wrokers: 2\n", "typo.yaml");
  REQUIRE(!c);
  CHECK(c.error().code() == celer::error_code::invalid_argument);
  CHECK_THAT(c.error().message(), Contains("typo.yaml:2: unknown key 'num_wrokers'.") &&
                                    Contains("Did you mean 'num_workers'?") &&
                                    Contains("Valid keys: name, num_workers, lr, mode, speeds, seed, verbose."));
  // Nothing near: no guess.
  auto far = schema().parse("learning_rate: 0.1\n", "far.yaml");
  REQUIRE(!far);
  CHECK_THAT(far.error().message(), !Contains("Did you mean"));
}

TEST_CASE("a value of the wrong type or shape names the key and what it means", "[apps_common]") {
  auto type = schema().parse("lr: fast\n", "t.yaml");
  REQUIRE(!type);
  CHECK_THAT(type.error().message(), Contains("t.yaml:1: key 'lr' cannot be 'fast' (lr: learning rate)."));
  auto list = schema().parse("speeds: 3\n", "l.yaml");
  REQUIRE(!list);
  CHECK_THAT(list.error().message(), Contains("key 'speeds' cannot be '3'"));
  auto map = schema().parse("num_workers: {a: 1}\n", "m.yaml");
  REQUIRE(!map);
  CHECK_THAT(map.error().message(), Contains("key 'num_workers' cannot be a list or mapping"));
  auto not_map = schema().parse("- a\n- b\n", "s.yaml");
  REQUIRE(!not_map);
  CHECK_THAT(not_map.error().message(), Contains("s.yaml: a config is a YAML mapping"));
  auto not_yaml = schema().parse("a: [1,\n", "y.yaml");
  REQUIRE(!not_yaml);
  CHECK_THAT(not_yaml.error().message(), Contains("y.yaml: not YAML"));
}

TEST_CASE("a key's choices are checked with the values it takes and its hint", "[apps_common]") {
  demo_config c;
  CHECK(schema().check_choices(c));
  c.mode = "asynchronous";
  auto bad = schema().check_choices(c);
  REQUIRE(!bad);
  CHECK(bad.error().message() == "key 'mode' is 'asynchronous': use sync, async or hybrid (hybrid switches)");
}

TEST_CASE("the JSON a schema writes reads back to the same config", "[apps_common]") {
  demo_config c;
  c.num_workers = 7;
  c.speeds = {2.5, 1};
  c.mode = "hybrid";
  c.seed = 42;
  const auto json = schema().to_json(c);
  CHECK_THAT(json, Contains("\"num_workers\": 7"));
  auto again = schema().parse(json, "run.json");
  REQUIRE(again);
  CHECK(schema().to_json(*again) == json);
  CHECK(again->seed == 42);
}

TEST_CASE("each key is a flag of the same name, and only given flags win over the file", "[apps_common]") {
  demo_config flags;
  CLI::App cli{"demo"};
  parse(cli, {"--num-workers", "8", "--speeds", "3", "1", "--mode", "async"}, flags);
  demo_config from_file;
  from_file.lr = 0.5;
  from_file.name = "file";
  schema().apply_flags(cli, flags, from_file);
  CHECK(from_file.num_workers == 8);
  CHECK(from_file.speeds == std::vector<double>{3, 1});
  CHECK(from_file.mode == "async");
  CHECK(from_file.lr == 0.5);       // no --lr: the file's value stays
  CHECK(from_file.name == "file");
  // A file-only key has no flag.
  demo_config more;
  CLI::App other{"demo"};
  CHECK_THROWS_AS(parse(other, {"--seed", "3"}, more), CLI::ExtrasError);
  CHECK(apps::flag_of("num_workers") == "--num-workers");
}

TEST_CASE("--help lists every key with its line", "[apps_common]") {
  const auto help = schema().help();
  CHECK_THAT(help, Contains("    num_workers         worker actors\n"));
  CHECK_THAT(help, Contains("    seed                the seed\n"));
}

TEST_CASE("edit distance and the nearest name", "[apps_common]") {
  CHECK(apps::edit_distance("", "") == 0);
  CHECK(apps::edit_distance("kitten", "sitting") == 3);
  CHECK(apps::edit_distance("stges", "stages") == 1);
  const std::array<std::string_view, 3> names{"stages", "input", "output"};
  CHECK(apps::closest_to("stges", names) == "stages");
  CHECK(apps::closest_to("zzzzzz", names).empty());
  CHECK(apps::either_of(names) == "stages, input or output");
  CHECK(apps::either_of(std::span(names).first(1)) == "stages");
  CHECK(apps::unknown_key_message("inptu", "in 'run'", names) ==
        "unknown key 'inptu' in 'run'. Did you mean 'input'? Valid keys: stages, input, output.");
}

TEST_CASE("a visit shows each key's value with its own type, to read and to write", "[apps_common]") {
  demo_config c;
  c.num_workers = 5;
  c.speeds = {1.5};
  std::vector<std::string> seen;
  const demo_config& read_only = c;
  schema().visit(read_only, [&](std::string_view key, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, int>) seen.push_back(std::string(key) + "=" + std::to_string(value));
    else if constexpr (std::is_same_v<T, std::vector<double>>) seen.push_back(std::string(key) + "#" + std::to_string(value.size()));
    else seen.push_back(std::string(key));
  });
  CHECK(seen == std::vector<std::string>{"name", "num_workers=5", "lr", "mode", "speeds#1", "seed", "verbose"});
  // Writing through it: every int doubled, every string upper-cased.
  schema().visit(c, [](std::string_view, auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, int>) value *= 2;
    if constexpr (std::is_same_v<T, std::string>) {
      for (auto& ch : value) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
  });
  CHECK(c.num_workers == 10);
  CHECK(c.mode == "SYNC");
  CHECK(c.name == "RUN");
}

TEST_CASE("the YAML a schema writes (--print-config) says what each key means and reads back", "[apps_common]") {
  demo_config c;
  c.name = "a: run # not a comment";
  c.num_workers = 5;
  c.speeds = {3, 1.5};
  c.verbose = true;
  const auto text = schema().to_yaml(c);
  CHECK_THAT(text, Contains("# worker actors\nnum_workers: 5\n"));
  CHECK_THAT(text, Contains("# the seed\nseed: 1\n"));
  auto back = schema().parse(text, "printed.yaml");
  REQUIRE(back);
  CHECK(back->name == c.name);
  CHECK(back->num_workers == 5);
  CHECK(back->speeds == c.speeds);
  CHECK(back->verbose);
  CHECK(back->mode == "sync");
}

namespace {

struct inner {
  std::string name = "tpe";
  int trials = 10;
};
struct outer {
  int samples = 4;
  std::string data = "digits";
  inner searcher;
};

const apps::config_schema<outer>& outer_schema() {
  using c = outer;
  static const apps::config_schema<outer> s{{
    apps::field("samples", &c::samples, "trials in all"),
    apps::field("data", &c::data, "what the trials read").kept_on_resume(),
    apps::section<c>(
      "searcher", "a name, or {name, trials}",
      [](const YAML::Node& n, c& x, std::string_view source) -> celer::expected<void> {
        if (n.IsScalar()) {
          x.searcher.name = n.Scalar();
          return {};
        }
        if (!n.IsMap() || !n["name"]) {
          return celer::error(celer::error_code::invalid_argument,
                              std::string(source) + ":" + std::to_string(n.Mark().line + 1) + ": searcher needs a name");
        }
        x.searcher.name = n["name"].as<std::string>();
        if (n["trials"]) x.searcher.trials = n["trials"].as<int>();
        return {};
      },
      [](const c& x, nlohmann::ordered_json& j) { j["searcher"] = {{"name", x.searcher.name}, {"trials", x.searcher.trials}}; })
      .named_by(&c::searcher, &inner::name)
      .one_of({"random", "tpe"})
      .kept_on_resume(),
  }};
  return s;
}

} // namespace

TEST_CASE("a section is read by the app's reader, named by a flag, and written back", "[apps_common]") {
  auto c = outer_schema().parse("samples: 8\nsearcher: {name: random, trials: 3}\n", "a.yaml");
  REQUIRE(c);
  CHECK(c->searcher.name == "random");
  CHECK(c->searcher.trials == 3);
  auto bad = outer_schema().parse("searcher: {trials: 3}\n", "b.yaml");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message(), Contains("b.yaml:1: searcher needs a name"));
  auto back = outer_schema().parse(outer_schema().to_json(*c), "run.json");
  REQUIRE(back);
  CHECK(back->searcher.trials == 3);
  CHECK(outer_schema().parse(outer_schema().to_yaml(*c), "printed.yaml")->searcher.name == "random");

  CLI::App cli;
  outer flags;
  outer_schema().add_flags(cli, flags);
  std::vector<const char*> argv{"demo", "--searcher", "tpe", "--data", "fashion", "--samples", "9"};
  cli.parse(static_cast<int>(argv.size()), argv.data());
  outer fresh = *c;
  outer_schema().apply_flags(cli, flags, fresh);
  CHECK(fresh.searcher.name == "tpe");
  CHECK(fresh.searcher.trials == 3);  // the flag names the section; the rest stays
  CHECK(fresh.data == "fashion");
  // Resumed: the keys kept on resume keep their saved values, and their flags are named.
  outer saved = *c;
  const auto ignored = outer_schema().apply_flags_on_resume(cli, flags, saved);
  CHECK(ignored == std::vector<std::string>{"--data", "--searcher"});
  CHECK(saved.samples == 9);
  CHECK(saved.searcher.name == "random");
  CHECK(saved.data == "digits");
  saved.searcher.name = "grid";
  CHECK_THAT(outer_schema().check_choices(saved).error().message(), Contains("key 'searcher' is 'grid': use random or tpe"));
}

TEST_CASE("a section whose keys have a schema of their own is read with 'in' its name", "[apps_common]") {
  const YAML::Node root = YAML::Load("run:\n  num_workers: 3\n  nmu_workers: 4\n");
  auto c = schema().read(root["run"], "p.yaml", "run", demo_config{});
  REQUIRE_FALSE(c);
  CHECK_THAT(c.error().message(), Contains("p.yaml:3: unknown key 'nmu_workers' in 'run'. Did you mean 'num_workers'?"));
  auto scalar = schema().read(YAML::Load("run: 3")["run"], "p.yaml", "run", demo_config{});
  REQUIRE_FALSE(scalar);
  CHECK_THAT(scalar.error().message(), Contains("run must be a mapping"));
}
