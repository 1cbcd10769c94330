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

  expected<void> generate(const YAML::Node& n, generate_config& g) const {
    if (auto ok = known(n, "generate", {"dir", "catalogs", "items_per_catalog", "categories",
                                        "zipf_s", "seed"});
        !ok)
      return ok;
    g.enabled = true;
    if (auto ok = get(n, "dir", g.dir, "a path"); !ok) return ok;
    if (auto ok = get(n, "catalogs", g.catalogs, "a positive integer"); !ok) return ok;
    if (auto ok = get(n, "items_per_catalog", g.items_per_catalog, "a positive integer"); !ok) return ok;
    if (auto ok = get(n, "categories", g.categories, "a positive integer"); !ok) return ok;
    if (auto ok = get(n, "zipf_s", g.zipf_s, "a number"); !ok) return ok;
    return get(n, "seed", g.seed, "an integer");
  }

  expected<void> run(const YAML::Node& n, run_config& r) const {
    if (auto ok = known(n, "run", {"workers", "cpus_per_worker", "prefetch", "scheduling",
                                   "reshard_every", "cache", "cache_dir", "max_worker_restarts"});
        !ok)
      return ok;
    if (auto ok = get(n, "workers", r.workers, "a positive integer"); !ok) return ok;
    if (auto ok = get(n, "cpus_per_worker", r.cpus_per_worker, "a number of CPUs"); !ok) return ok;
    if (auto ok = get(n, "prefetch", r.prefetch, "a positive integer"); !ok) return ok;
    if (auto ok = get(n, "scheduling", r.scheduling, "fixed, steal or reshard"); !ok) return ok;
    if (auto ok = get(n, "reshard_every", r.reshard_every, "a positive integer"); !ok) return ok;
    if (auto ok = get(n, "cache", r.cache, "true or false"); !ok) return ok;
    if (auto ok = get(n, "cache_dir", r.cache_dir, "a path"); !ok) return ok;
    return get(n, "max_worker_restarts", r.max_worker_restarts, "an integer");
  }
};

} // namespace

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
    if (const auto n = root["generate"])
      if (auto ok = r.generate(n, c.generate); !ok) return ok.error();
    if (const auto n = root["run"])
      if (auto ok = r.run(n, c.run); !ok) return ok.error();
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

std::string to_yaml(const config& c) {
  YAML::Emitter y;
  const auto& p = c.pipeline;
  y << YAML::BeginMap << YAML::Key << "name" << YAML::Value << c.name;
  if (c.generate.enabled) {
    const auto& g = c.generate;
    y << YAML::Key << "generate" << YAML::Value << YAML::BeginMap << YAML::Key << "dir"
      << YAML::Value << g.dir << YAML::Key << "catalogs" << YAML::Value << g.catalogs
      << YAML::Key << "items_per_catalog" << YAML::Value << g.items_per_catalog << YAML::Key
      << "categories" << YAML::Value << g.categories << YAML::Key << "zipf_s" << YAML::Value
      << g.zipf_s << YAML::Key << "seed" << YAML::Value << g.seed << YAML::EndMap;
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
  const auto& r = c.run;
  y << YAML::EndMap << YAML::Key << "run" << YAML::Value << YAML::BeginMap << YAML::Key
    << "workers" << YAML::Value << r.workers << YAML::Key << "cpus_per_worker" << YAML::Value
    << r.cpus_per_worker << YAML::Key << "prefetch" << YAML::Value << r.prefetch << YAML::Key
    << "scheduling" << YAML::Value << r.scheduling << YAML::Key << "reshard_every"
    << YAML::Value << r.reshard_every << YAML::Key << "cache" << YAML::Value << r.cache;
  if (!r.cache_dir.empty()) y << YAML::Key << "cache_dir" << YAML::Value << r.cache_dir;
  y << YAML::Key << "max_worker_restarts" << YAML::Value << r.max_worker_restarts << YAML::EndMap
    << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

std::string key_help() {
  return R"(  name                  the run's name (output goes to celer_results/<name>)
  generate:             write the synthetic skewed catalog first, if `dir` has none:
    dir, catalogs, items_per_catalog, categories, zipf_s, seed
  input:
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
  run:
    workers             worker actors (default 2); cpus_per_worker (default 1)
    prefetch            blocks a worker holds at once (default 2)
    scheduling          fixed (static shares) | steal (default) | reshard
    reshard_every       completions between re-deals (default 16)
    cache, cache_dir    keep each pass's blocks (default true, <output>/.cache)
    max_worker_restarts a dead worker comes back this often (default 3)
)";
}

} // namespace celer::preprocess_app
