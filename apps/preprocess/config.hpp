#pragma once
// celer-preprocess's configuration: a pipeline (input, stages, output) and how to run it,
// read from YAML (config/preprocess/*.yaml), overridden by flags, checked with errors that
// name the file, line and key. No runtime calls: the app, the tests and --help share it.
//
//   auto cfg = celer::preprocess_app::load_config_file("config/preprocess/catalog.yaml");
//   if (!cfg) { std::cerr << cfg.error().message() << "\n"; return 2; }
//   cfg->run.workers = 4;                                   // a flag overrides the file
//   if (auto ok = celer::preprocess_app::finish(*cfg); !ok) ...   // globs, paths, checks
#include <celer/actors/preprocess/pipeline.hpp>
#include <celer/actors/preprocess/work_queue.hpp>
#include <celer/apps/config_schema.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace celer::preprocess_app {

/// The synthetic catalog to write before the run when `generate.dir` has none.
struct generate_config {
  bool enabled = false;
  std::string dir;
  std::uint32_t catalogs = 55, items_per_catalog = 15000, categories = 40;
  double zipf_s = 1.1;
  std::uint64_t seed = 1;
};

struct run_config {
  std::size_t workers = 2;
  double cpus_per_worker = 1;
  std::size_t prefetch = 2;
  /// fixed | steal | reshard
  std::string scheduling = "steal";
  std::size_t reshard_every = 16;
  /// Keep each pass's blocks for the next pass and for later runs (<output>/../.cache/<name>
  /// unless cache_dir is given).
  bool cache = true;
  std::string cache_dir;
  int max_worker_restarts = 3;
};

struct config {
  std::string name = "catalog";
  /// Where the run writes (default ./celer_results/<name>).
  std::string output;
  generate_config generate;
  preprocess::pipeline pipeline;
  run_config run;
  /// Where the config came from, for messages ("config/preprocess/catalog.yaml", "built-in").
  std::string source;
};

/// The keys of the `run:` and `generate:` sections, declared once: their YAML reader, the
/// run keys' flags (--workers, --scheduling, ...), --help's lines and --print-config.
[[nodiscard]] const apps::config_schema<run_config>& run_keys();
[[nodiscard]] const apps::config_schema<generate_config>& generate_keys();

/// Parses YAML text; errors name `source`, the line and the key ("unknown key 'stges' in
/// the top level; did you mean 'stages'?").
[[nodiscard]] expected<config> parse_config(std::string_view yaml, std::string source);
[[nodiscard]] expected<config> load_config_file(const std::string& path);

/// Expands globs in input.paths (sorted), fills defaults (output, cache_dir), makes every
/// path absolute against the current directory (the user's: workers on a cluster run in
/// their own), and checks the pipeline (pipeline::validate) and the run settings. Call after
/// flags are applied.
[[nodiscard]] expected<void> finish(config& c);

/// The config as YAML (what --print-config prints and run.yaml keeps).
[[nodiscard]] std::string to_yaml(const config& c);

/// The keys, one line each, for --help.
[[nodiscard]] std::string key_help();

} // namespace celer::preprocess_app
