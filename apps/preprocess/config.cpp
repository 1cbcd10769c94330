#include "config.hpp"

#include <celer/apps/config_schema.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <glob.h>
#include <set>
#include <sstream>
#include <vector>

namespace celer::preprocess_app {

namespace pp = celer::preprocess;

namespace {

/// `p` made absolute against the current directory and normalised ("a/./b" -> "/cwd/a/b");
/// as it was when it cannot be.
std::string absolute_path(const std::string& p) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(p, ec);
  if (ec) return p;
  return abs.lexically_normal().string();
}

struct reader {
  std::string source;

  error at(const YAML::Node& n, const std::string& what) const {
    return error(error_code::invalid_argument,
                 source + ":" + std::to_string(n.Mark().line + 1) + ": " + what);
  }

  expected<void> known(const YAML::Node& map, std::string_view where,
                       std::initializer_list<std::string_view> keys) const {
    if (!map.IsMap()) return at(map, std::string(where) + " must be a mapping");
    for (const auto& kv : map) {
      const auto k = kv.first.as<std::string>();
      if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
      return at(kv.first, apps::unknown_key_message(k, "in " + std::string(where), std::span(keys.begin(), keys.size())));
    }
    return {};
  }

  template <class T>
  expected<void> get(const YAML::Node& map, const char* key, T& out, const char* wanted) const {
    const auto n = map[key];
    if (!n) return {};
    T v{};
    if (!n.IsScalar() || !YAML::convert<T>::decode(n, v))
      return at(n, std::string(key) + " must be " + wanted);
    out = v;
    return {};
  }

  expected<void> strings(const YAML::Node& map, const char* key, std::vector<std::string>& out) const {
    const auto n = map[key];
    if (!n) return {};
    out.clear();
    if (n.IsScalar()) {
      out.push_back(n.as<std::string>());
      return {};
    }
    if (!n.IsSequence()) return at(n, std::string(key) + " must be a string or a list of strings");
    for (const auto& e : n) {
      if (!e.IsScalar()) return at(e, std::string(key) + " must be a list of strings");
      out.push_back(e.as<std::string>());
    }
    return {};
  }

  expected<void> input(const YAML::Node& n, pp::input_spec& in) const {
    if (auto ok = known(n, "input", {"format", "paths", "labels", "fields", "delimiter",
                                     "block_items", "limit"});
        !ok)
      return ok;
    std::string format = std::string(pp::input_format_name(in.format));
    if (auto ok = get(n, "format", format, "csv, jsonl, text or idx"); !ok) return ok;
    auto f = pp::parse_input_format(format);
    if (!f) return at(n["format"], f.error().message());
    in.format = *f;
    if (auto ok = strings(n, "paths", in.paths); !ok) return ok;
    if (auto ok = get(n, "labels", in.labels, "a path"); !ok) return ok;
    std::string delimiter(1, in.delimiter);
    if (auto ok = get(n, "delimiter", delimiter, "one character"); !ok) return ok;
    if (delimiter.size() != 1) return at(n["delimiter"], "delimiter must be one character");
    in.delimiter = delimiter[0];
    if (auto ok = get(n, "block_items", in.block_items, "a positive integer"); !ok) return ok;
    if (auto ok = get(n, "limit", in.limit, "an integer (0: all)"); !ok) return ok;
    if (const auto fields = n["fields"]) {
      if (auto ok = known(fields, "input.fields", {"key", "label", "category", "text", "values"}); !ok)
        return ok;
      if (auto ok = get(fields, "key", in.fields.key, "a field name"); !ok) return ok;
      if (auto ok = get(fields, "label", in.fields.label, "a field name"); !ok) return ok;
      if (auto ok = get(fields, "category", in.fields.category, "a field name"); !ok) return ok;
      if (auto ok = strings(fields, "text", in.fields.text); !ok) return ok;
      if (auto ok = strings(fields, "values", in.fields.values); !ok) return ok;
    }
    return {};
  }

  expected<void> stages(const YAML::Node& n, std::vector<pp::stage_spec>& out) const {
    if (!n.IsSequence()) return at(n, "stages must be a list (- lowercase, - normalize: {mode: zscore})");
    out.clear();
    for (const auto& s : n) {
      pp::stage_spec spec;
      if (s.IsScalar()) {
        spec.op = s.as<std::string>();
      } else if (s.IsMap() && s.size() == 1) {
        const auto kv = *s.begin();
        spec.op = kv.first.as<std::string>();
        if (kv.second.IsMap()) {
          for (const auto& p : kv.second) {
            if (p.second.IsScalar()) {
              spec.params[p.first.as<std::string>()] = p.second.as<std::string>();
            } else if (p.second.IsSequence()) {
              std::string joined;
              for (const auto& e : p.second) joined += (joined.empty() ? "" : ",") + e.as<std::string>();
              spec.params[p.first.as<std::string>()] = joined;
            } else {
              return at(p.second, spec.op + "." + p.first.as<std::string>() +
                                    " must be a value or a list of values");
            }
          }
        } else if (!kv.second.IsNull()) {
          return at(kv.second, spec.op + "'s parameters must be a mapping ({name: value})");
        }
      } else {
        return at(s, "a stage is a name (- lowercase) or one name with its parameters "
                     "(- normalize: {mode: zscore})");
      }
      out.push_back(std::move(spec));
    }
    return {};
  }

  expected<void> output(const YAML::Node& n, config& c) const {
    if (auto ok = known(n, "output", {"dir", "field", "shards", "shard_by", "label_names"}); !ok)
      return ok;
    auto& o = c.pipeline.output;
    if (auto ok = get(n, "dir", c.output, "a path"); !ok) return ok;
    if (auto ok = get(n, "field", o.field, "values, pixels, tokens or text"); !ok) return ok;
    if (auto ok = get(n, "shards", o.shards, "a positive integer"); !ok) return ok;
    if (auto ok = get(n, "shard_by", o.shard_by, "key, category or category_size"); !ok) return ok;
    return strings(n, "label_names", o.label_names);
  }

};

} // namespace

const apps::config_schema<run_config>& run_keys() {
  using r = run_config;
  static const apps::config_schema<run_config> keys{{
    apps::field("workers", &r::workers, "worker actors (default 2)"),
    apps::field("cpus_per_worker", &r::cpus_per_worker, "CPUs each worker holds (default 1)"),
    apps::field("prefetch", &r::prefetch, "blocks a worker holds at once (default 2)"),
    apps::field("scheduling", &r::scheduling, "fixed (static shares) | steal (default) | reshard"),
    apps::field("reshard_every", &r::reshard_every, "completions between re-deals (default 16)"),
    apps::field("cache", &r::cache, "keep each pass's blocks for the next pass and later runs (default true)"),
    apps::field("cache_dir", &r::cache_dir, "where the cache is (default <output>/.cache)"),
    apps::field("max_worker_restarts", &r::max_worker_restarts, "a dead worker comes back this often (default 3)"),
  }};
  return keys;
}

const apps::config_schema<generate_config>& generate_keys() {
  using g = generate_config;
  static const apps::config_schema<generate_config> keys{{
    apps::field("dir", &g::dir, "where the catalog is written (if it has none yet)").no_flag(),
    apps::field("catalogs", &g::catalogs, "catalog files (default 55)").no_flag(),
    apps::field("items_per_catalog", &g::items_per_catalog, "items in each (default 15000)").no_flag(),
    apps::field("categories", &g::categories, "categories (default 40)").no_flag(),
    apps::field("zipf_s", &g::zipf_s, "how skewed the categories' sizes are (Zipf's s, default 1.1)").no_flag(),
    apps::field("seed", &g::seed, "the seed (default 1)").no_flag(),
  }};
  return keys;
}

expected<config> parse_config(std::string_view yaml, std::string source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return error(error_code::invalid_argument,
                 source + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  config c;
  c.source = source;
  reader r{std::move(source)};
  if (!root.IsMap()) return r.at(root, "a config is a YAML mapping (name:, input:, stages:, ...)");
  try {
    if (auto ok = r.known(root, "the top level", {"name", "input", "stages", "output", "generate", "run"}); !ok)
      return ok.error();
    if (auto ok = r.get(root, "name", c.name, "a name"); !ok) return ok.error();
    if (const auto n = root["input"]) {
      if (auto ok = r.input(n, c.pipeline.input); !ok) return ok.error();
    } else {
      return r.at(root, "no input: (format:, paths:, fields:)");
    }
    if (const auto n = root["stages"])
      if (auto ok = r.stages(n, c.pipeline.stages); !ok) return ok.error();
    if (const auto n = root["output"])
      if (auto ok = r.output(n, c); !ok) return ok.error();
    if (const auto n = root["generate"]) {
      auto g = generate_keys().read(n, c.source, "generate", c.generate);
      if (!g) return g.error();
      c.generate = std::move(*g);
      c.generate.enabled = true;
    }
    if (const auto n = root["run"]) {
      auto run = run_keys().read(n, c.source, "run", c.run);
      if (!run) return run.error();
      c.run = std::move(*run);
    }
  } catch (const YAML::Exception& e) {
    return error(error_code::invalid_argument,
                 c.source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return c;
}

expected<config> load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return error(error_code::not_found,
                 "cannot read config " + path + " (the shipped ones are in config/preprocess/)");
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

expected<void> finish(config& c) {
  if (c.name.empty() || c.name.find('/') != std::string::npos)
    return error(error_code::invalid_argument, "name '" + c.name + "' must be non-empty, without '/'");
  if (c.output.empty()) c.output = "celer_results/" + c.name;
  if (c.run.cache && c.run.cache_dir.empty()) c.run.cache_dir = c.output + "/.cache";
  if (!c.run.cache) c.run.cache_dir.clear();
  if (c.run.workers == 0) return error(error_code::invalid_argument, "run.workers must be at least 1");
  if (!(c.run.cpus_per_worker >= 0))
    return error(error_code::invalid_argument, "run.cpus_per_worker must be 0 or more");
  if (auto p = pp::parse_queue_policy(c.run.scheduling); !p)
    return error(error_code::invalid_argument, "run.scheduling: " + p.error().message());
  // Globs: each pattern's matches, sorted; a pattern that matches nothing stays as it is,
  // so the error names it (unless generate: will make it).
  std::vector<std::string> paths;
  for (const auto& pattern : c.pipeline.input.paths) {
    glob_t g{};
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + g.gl_pathc);
      std::sort(matched.begin(), matched.end());
      paths.insert(paths.end(), matched.begin(), matched.end());
    } else {
      paths.push_back(pattern);
    }
    ::globfree(&g);
  }
  c.pipeline.input.paths = std::move(paths);
  // Every path absolute, against the directory the user ran from, before anything is sent
  // to a worker: a worker on a cluster runs in a directory of its own.
  for (auto& p : c.pipeline.input.paths) p = absolute_path(p);
  if (!c.pipeline.input.labels.empty()) c.pipeline.input.labels = absolute_path(c.pipeline.input.labels);
  c.output = absolute_path(c.output);
  if (!c.run.cache_dir.empty()) c.run.cache_dir = absolute_path(c.run.cache_dir);
  if (!c.generate.dir.empty()) c.generate.dir = absolute_path(c.generate.dir);
  return c.pipeline.validate();
}

namespace {

/// A section the schema wrote as JSON, as a YAML node written in block style (as the rest).
YAML::Node block(const std::string& json) {
  auto n = YAML::Load(json);
  n.SetStyle(YAML::EmitterStyle::Block);
  return n;
}

} // namespace

std::string to_yaml(const config& c) {
  YAML::Emitter y;
  const auto& p = c.pipeline;
  y << YAML::BeginMap << YAML::Key << "name" << YAML::Value << c.name;
  if (c.generate.enabled) {
    y << YAML::Key << "generate" << YAML::Value << block(generate_keys().to_json(c.generate));
  }
  y << YAML::Key << "input" << YAML::Value << YAML::BeginMap << YAML::Key << "format"
    << YAML::Value << std::string(pp::input_format_name(p.input.format)) << YAML::Key << "paths"
    << YAML::Value << YAML::Flow << p.input.paths;
  if (!p.input.labels.empty()) y << YAML::Key << "labels" << YAML::Value << p.input.labels;
  y << YAML::Key << "fields" << YAML::Value << YAML::BeginMap;
  const auto& f = p.input.fields;
  if (!f.key.empty()) y << YAML::Key << "key" << YAML::Value << f.key;
  if (!f.label.empty()) y << YAML::Key << "label" << YAML::Value << f.label;
  if (!f.category.empty()) y << YAML::Key << "category" << YAML::Value << f.category;
  if (!f.text.empty()) y << YAML::Key << "text" << YAML::Value << YAML::Flow << f.text;
  if (!f.values.empty()) y << YAML::Key << "values" << YAML::Value << YAML::Flow << f.values;
  y << YAML::EndMap << YAML::Key << "block_items" << YAML::Value << p.input.block_items;
  if (p.input.limit > 0) y << YAML::Key << "limit" << YAML::Value << p.input.limit;
  y << YAML::EndMap << YAML::Key << "stages" << YAML::Value << YAML::BeginSeq;
  for (const auto& s : p.stages) {
    if (s.params.empty()) {
      y << s.op;
      continue;
    }
    y << YAML::BeginMap << YAML::Key << s.op << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto& [k, v] : s.params) y << YAML::Key << k << YAML::Value << v;
    y << YAML::EndMap << YAML::EndMap;
  }
  y << YAML::EndSeq << YAML::Key << "output" << YAML::Value << YAML::BeginMap << YAML::Key
    << "dir" << YAML::Value << c.output << YAML::Key << "field" << YAML::Value << p.output.field
    << YAML::Key << "shards" << YAML::Value << p.output.shards << YAML::Key << "shard_by"
    << YAML::Value << p.output.shard_by;
  if (!p.output.label_names.empty())
    y << YAML::Key << "label_names" << YAML::Value << YAML::Flow << p.output.label_names;
  y << YAML::EndMap << YAML::Key << "run" << YAML::Value << block(run_keys().to_json(c.run)) << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

std::string key_help() {
  return R"(  name                  the run's name (output goes to celer_results/<name>)
  generate:             write the synthetic skewed catalog first, if `dir` has none:
)" + generate_keys().help() + R"(  input:
    format              csv | jsonl | text | idx
    paths               files or globs (sorted); idx: the images file
    labels              idx: the labels file
    fields              key, label, category, text: [..], values: [..] (csv/jsonl)
    delimiter           csv: one character (default ,)
    block_items         items per block, the unit a worker takes (default 1024)
    limit               only the first N items of each file (0: all)
  stages:               a list, each a name or {name: {param: value}} (see STAGES)
  output:
    dir                 default celer_results/<name>
    field               the payload: values (f32) | pixels (u8) | tokens (u32) | text
    shards              shard files (default 8)
    shard_by            key (consistent hashing) | category (each label in turn)
                        | category_size (each label, fewest bytes first)
    label_names         class names for the manifest
  run:                  (each key is a flag too: --workers, --cache-dir, ...)
)" + run_keys().help();
}

} // namespace celer::preprocess_app
