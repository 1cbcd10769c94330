// celer-preprocess: a preprocessing pipeline over celer's workers (apps/preprocess/README.md).
//
//   celer-preprocess                                       # the built-in catalog config
//   celer-preprocess --config config/preprocess/fashion-mnist.yaml
//   celer-preprocess --address 127.0.0.1:6380 ...          # on a cluster
#include "config.hpp"
#include "default_config.hpp"

#include <celer/actors/preprocess/catalog.hpp>
#include <celer/actors/preprocess/executor.hpp>
#include <celer/actors/preprocess/manifest.hpp>
#include <celer/actors/preprocess/records.hpp>
#include <celer/celer.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>
#include <unistd.h>

namespace {

namespace app = celer::preprocess_app;
namespace pp = celer::preprocess;

std::string help_footer() {
  return R"(
WHAT IT DOES
  Reads items (rows of CSV or JSON Lines files, lines of text, IDX images), runs them
  through a list of stages, and writes shard files of CELERRC1 records (what celer-train
  reads: data: records:<output>) with a manifest.json. The input is cut into blocks of
  block_items items; worker actors (run.workers, each holding cpus_per_worker CPUs) take
  blocks from a shared queue. scheduling: fixed gives each worker a fixed share (blocks
  hashed onto workers); steal (the default) lets an idle worker take the last blocks of the
  worker that will finish last; reshard also deals the queued blocks again every reshard_every
  completions in proportion to each worker's measured speed, so a slow node keeps less.
  A stage that needs the whole data set (normalize, vocabulary, bpe, sample, rebalance)
  makes one more pass: the workers return each block's statistics, the driver merges
  them, and the next pass applies them. With run.cache, each pass keeps each block's
  items for the next pass and for later runs, keyed by a content hash of the input bytes
  and the stages: a rerun of an unchanged config reads its blocks from the cache.
  A worker that dies loses nothing: its blocks go back to the queue and it is restarted;
  the output is the same, bit for bit, as a run where nothing died.

STAGES
  lowercase                         ASCII letters of the text to lower case
  tokenize                          the text's words, split on whitespace, one space apart
  filter: {min_tokens, max_tokens}  drops items with fewer or more words
  hash_features: {dims, seed}       a bag of words: dims counts (word -> XXH64 % dims),
                                    put before the item's values
  normalize: {mode: zscore|minmax}  each value by the statistics of all items (2 passes)
  vocabulary: {min_count, max_size} the text as token ids of a vocabulary built on all
                                    items ("<pad>" 0, "<unk>" 1, then by count)
  bpe: {vocab_size, min_pair_count} the text as byte-level BPE ids, trained on all items
  to_float: {scale}                 an image's pixels as values (x scale, default 1/255)
  augment: {hflip, vflip, crop_padding, noise_std, seed}
                                    images, each with its own seed (from its key): reruns
                                    give the same bytes
  sample: {fraction, seed}          stratified: each label keeps round(fraction x count)
  rebalance: {mode: oversample|undersample, seed}
                                    each label to the largest (copies keyed "key#n") or
                                    smallest label's count

CONFIGURATION (YAML; flags win over the file)
)" + app::key_help() +
         R"(
OUTPUT (--output, default ./celer_results/<name>)
  shard-NNNNN-of-NNNNN.rec  the records (actors/preprocess/README.md has the layout)
  manifest.json        schema, shape, classes, items, each shard's records and bytes, the
                       key checksum (proves no item was lost or written twice) and the
                       config's hash
  summary.json         items in and out, seconds per pass, blocks per worker, blocks
                       stolen and re-dealt, worker failures, cache hits, records per
                       shard and the worst category skew
  shard-*.csv|jsonl    with --export: each shard for people
  run.yaml             the configuration used

EXAMPLES
  celer-preprocess                                        # the catalog, embedded
  celer-preprocess --config config/preprocess/fashion-mnist.yaml
  celer-preprocess --workers 4 --scheduling fixed --name fixed   # static shares
  celer-preprocess --limit 2000 --name try                # 2,000 items of each file
  celer-preprocess --address 127.0.0.1:6380 --workers 4   # on a cluster (celer start ...)
  celer-train --data records:celer_results/fashion-mnist  # train on the output
)";
}

/// CELER_PREPROCESS_SLOW_WORKER=N:FACTOR: worker N takes FACTOR times as long per block (a
/// slower node), for the scheduling benchmark. CELER_PREPROCESS_CRASH=N:BLOCK: worker N's
/// process ends at its BLOCK-th block of the last pass (on a cluster), for the
/// fault-tolerance test.
void read_hooks(pp::run_options& o) {
  if (const char* s = std::getenv("CELER_PREPROCESS_SLOW_WORKER")) {
    int n = -1;
    double f = 1;
    if (std::sscanf(s, "%d:%lf", &n, &f) == 2) o.slow_worker = n, o.slow_factor = f;
  }
  if (const char* s = std::getenv("CELER_PREPROCESS_CRASH")) {
    int n = -1;
    unsigned long long b = 0;
    if (std::sscanf(s, "%d:%llu", &n, &b) == 2) o.crash_worker = n, o.crash_at_block = b;
  }
}

std::string with_commas(std::uint64_t n) {
  auto s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

nlohmann::json summary_json(const app::config& cfg, const pp::run_result& r, const std::string& where) {
  nlohmann::json passes = nlohmann::json::array();
  for (const auto& p : r.passes) {
    nlohmann::json by_worker = nlohmann::json::object();
    for (const auto& [w, n] : p.blocks_by_worker) by_worker[w] = n;
    passes.push_back({{"seconds", p.seconds},
                      {"blocks", p.queue.blocks},
                      {"stolen", p.queue.stolen},
                      {"resharded", p.queue.resharded},
                      {"reshards", p.queue.reshards},
                      {"requeued", p.queue.requeued},
                      {"duplicates", p.queue.duplicates},
                      {"blocks_by_worker", by_worker},
                      {"fitted", p.fitted}});
  }
  return {{"name", cfg.name},
          {"where", where},
          {"items_in", r.items_in},
          {"items", r.items},
          {"items_per_s", r.seconds > 0 ? static_cast<double>(r.items_in) / r.seconds : 0.0},
          {"seconds", r.seconds},
          {"workers", cfg.run.workers},
          {"scheduling", cfg.run.scheduling},
          {"schema", r.schema},
          {"key_checksum", r.keys.hex()},
          {"config_hash", r.config_hash},
          {"worker_failures", r.worker_failures},
          {"cache_hits", r.cache_hits},
          {"shards", r.shard_files},
          {"shard_records", r.shard_records},
          {"worst_category_skew", r.worst_category_skew},
          {"passes", passes}};
}

} // namespace

int main(int argc, char** argv) {
  // Worker processes run this binary too: they serve the preprocessing workers.
  celer::serve_if_worker();

  CLI::App cli{"celer-preprocess: preprocessing on celer. Worker actors read blocks of the input,\n"
               "run them through the stages (tokenise, normalise, augment, sample, ...), and the\n"
               "output lands in checksummed shard files that celer-train reads.",
               "celer-preprocess"};
  cli.footer(help_footer());
  cli.get_formatter()->column_width(34);
  std::string config_path, address, name, output, export_format;
  bool print_config = false, no_cache = false;
  std::uint64_t limit = 0;
  app::run_config run_flags;  // only the fields of flags that were given are used
  cli.add_option("--config", config_path, "YAML config (default: the built-in config/preprocess/catalog.yaml)");
  cli.add_flag("--print-config", print_config, "Print the config (after flags) and exit");
  cli.add_option("--name", name, "Run name (the output directory's)");
  cli.add_option("--output", output, "Output directory (default ./celer_results/<name>)");
  // Each key of the config's run: section is a flag too (--workers for run.workers): run_keys().
  app::run_keys().add_flags(cli, run_flags);
  cli.add_flag("--no-cache", no_cache, "Neither read nor keep cached blocks (--cache false)");
  cli.add_option("--limit", limit, "Only the first N items of each input file");
  cli.add_option("--export", export_format, "Also write each shard as csv or jsonl, for people")
    ->check(CLI::IsMember({"csv", "jsonl"}));
  cli.add_option("--address", address, "HOST:PORT of a celer cluster (default: CELER_ADDRESS, else embedded)");
  CLI11_PARSE(cli, argc, argv);

  auto loaded = config_path.empty() ? app::parse_config(app::default_config_yaml, "built-in catalog.yaml")
                                    : app::load_config_file(config_path);
  if (!loaded) {
    std::cerr << "celer-preprocess: " << loaded.error().message() << "\n";
    return 2;
  }
  auto cfg = std::move(*loaded);
  if (!name.empty()) cfg.name = name;
  if (!output.empty()) cfg.output = output;
  app::run_keys().apply_flags(cli, run_flags, cfg.run);
  if (no_cache) cfg.run.cache = false;
  if (limit > 0) cfg.pipeline.input.limit = limit;

  if (cfg.generate.enabled && !print_config) {
    std::error_code ec;
    if (!std::filesystem::exists(cfg.generate.dir + "/catalog-00.jsonl", ec)) {
      std::cout << "writing the synthetic catalog (" << cfg.generate.catalogs << " x "
                << with_commas(cfg.generate.items_per_catalog) << " items) to " << cfg.generate.dir
                << " ..." << std::flush;
      const auto t = std::chrono::steady_clock::now();
      auto files = pp::write_catalog(cfg.generate.dir, {.catalogs = cfg.generate.catalogs,
                                                        .items_per_catalog = cfg.generate.items_per_catalog,
                                                        .categories = cfg.generate.categories,
                                                        .zipf_s = cfg.generate.zipf_s,
                                                        .seed = cfg.generate.seed});
      if (!files) {
        std::cerr << "\nceler-preprocess: cannot write the catalog: " << files.error().message() << "\n";
        return 1;
      }
      std::cout << " " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count()
                << " s\n";
    }
  }
  if (auto ok = app::finish(cfg); !ok) {
    std::cerr << "celer-preprocess: " << cfg.source << ": " << ok.error().message() << "\n";
    return 2;
  }
  if (print_config) {
    std::cout << app::to_yaml(cfg);
    return 0;
  }

  pp::run_options options{.output_dir = cfg.output,
                          .workers = cfg.run.workers,
                          .cpus_per_worker = cfg.run.cpus_per_worker,
                          .prefetch = cfg.run.prefetch,
                          .queue = {.policy = pp::parse_queue_policy(cfg.run.scheduling).value(),
                                    .reshard_every = cfg.run.reshard_every},
                          .cache_dir = cfg.run.cache_dir,
                          .max_worker_restarts = cfg.run.max_worker_restarts};
  read_hooks(options);
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  auto last_line = std::chrono::steady_clock::now() - std::chrono::hours(1);
  std::optional<std::size_t> done_pass;
  options.on_progress = [&](const pp::run_progress& p) {
    const auto now = std::chrono::steady_clock::now();
    const bool pass_done = p.queue.done == p.queue.blocks;
    if (!pass_done && now - last_line < std::chrono::milliseconds(tty ? 200 : 2000)) return;
    last_line = now;
    char line[256];
    std::snprintf(line, sizeof line,
                  "pass %zu/%zu  blocks %zu/%zu  items %s  %.1f s  %.0f items/s  stolen %zu  "
                  "re-dealt %zu  failures %zu  cached %zu",
                  p.pass + 1, p.passes, p.queue.done, p.queue.blocks, with_commas(p.items_in).c_str(),
                  p.seconds, p.seconds > 0 ? static_cast<double>(p.items_in) / p.seconds : 0.0,
                  p.queue.stolen, p.queue.resharded, p.worker_failures, p.cache_hits);
    if (pass_done && done_pass == p.pass) return;  // the end of the run repeats the last pass
    if (pass_done) done_pass = p.pass;
    std::cout << (tty ? "\r" : "") << line << (tty && !pass_done ? "" : "\n") << std::flush;
  };

  const char* cluster = std::getenv("CELER_ADDRESS");
  const bool embedded = address.empty() && (cluster == nullptr || *cluster == '\0');
  // Embedded, the workers are threads of this process: give the node the CPUs they ask for
  // even on a smaller machine, rather than leave a worker waiting for a CPU forever.
  const double cpus = std::max<double>(std::thread::hardware_concurrency(),
                                       static_cast<double>(cfg.run.workers) * cfg.run.cpus_per_worker);
  try {
    celer::init(celer::init_options{.address = address, .num_cpus = embedded ? cpus : 0});
  } catch (const celer::exception& e) {
    std::cerr << "celer-preprocess: cannot start celer" << (address.empty() ? "" : " on " + address)
              << ": " << e.what() << "\n";
    return 1;
  }
  const std::string where = !address.empty() ? "the cluster at " + address
                            : cluster != nullptr && *cluster != '\0' ? "the cluster at " + std::string(cluster)
                                                                      : "embedded celer";
  std::cout << "celer-preprocess: " << cfg.name << " on " << where << ", " << cfg.pipeline.input.paths.size()
            << " input file(s), " << cfg.pipeline.stages.size() << " stages, " << cfg.run.workers
            << " workers (" << cfg.run.scheduling << ")\n";
  auto result = pp::run_pipeline(cfg.pipeline, options);
  celer::shutdown();
  if (!result) {
    std::cerr << "celer-preprocess: " << result.error().message() << "\n";
    return 1;
  }
  {
    std::ofstream(cfg.output + "/summary.json") << summary_json(cfg, *result, where).dump(2) << "\n";
    std::ofstream(cfg.output + "/run.yaml") << app::to_yaml(cfg);
  }
  for (const auto& p : result->passes)
    if (!p.fitted.empty()) std::cout << "  fitted " << p.fitted << "\n";
  if (!export_format.empty()) {
    for (const auto& f : result->shard_files) {
      const auto path = cfg.output + "/" + f;
      auto reader = pp::record_reader::open(path);
      const auto out = path.substr(0, path.size() - 4) + "." + export_format;
      auto ok = reader ? (export_format == "csv" ? pp::write_csv(*reader, out) : pp::write_jsonl(*reader, out))
                       : celer::expected<void>(reader.error());
      if (!ok) {
        std::cerr << "celer-preprocess: cannot export " << path << ": " << ok.error().message() << "\n";
        return 1;
      }
    }
    std::cout << "  exported every shard as " << export_format << " beside it\n";
  }
  if (cfg.pipeline.output.shard_by != "key") {
    char skew[64];
    std::snprintf(skew, sizeof skew, "%.4f", result->worst_category_skew);
    std::cout << "  worst category skew over the shards: " << skew << " (0: each shard holds each category in proportion)\n";
  }
  std::cout << "done: " << with_commas(result->items_in) << " items in, " << with_commas(result->items)
            << " out, in " << result->seconds << " s ("
            << static_cast<std::uint64_t>(result->seconds > 0 ? result->items_in / result->seconds : 0)
            << " items/s); " << result->worker_failures << " worker failures; key checksum "
            << result->keys.hex() << "\n"
            << "output: " << cfg.output << " (" << result->shard_files.size() << " shards of " << result->schema
            << ", manifest.json, summary.json)\n";
  if (result->schema.rfind("f32:", 0) == 0 || result->schema.rfind("u8:", 0) == 0)
    std::cout << "train on it: celer-train --data records:" << cfg.output << "\n";
  return 0;
}
