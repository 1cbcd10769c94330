#pragma once
/// One declaration per key of an app's configuration, from which everything else about the
/// key is derived: reading it from YAML (with "did you mean" for a misspelt key), its
/// command-line flag, its line in --help, the values it may take, and writing it back as
/// JSON (run.json, which the same reader reads). What `knobs.def` is to the runtime.
///
///   struct my_config { int workers = 2; std::string mode = "sync"; };
///   const celer::apps::config_schema<my_config> schema{{
///     celer::apps::field("workers", &my_config::workers, "worker actors"),
///     celer::apps::field("mode", &my_config::mode, "sync | async").one_of({"sync", "async"}),
///   }};
///   auto cfg = schema.load_file("config/my/app.yaml");     // expected<my_config>
///   my_config flags;
///   schema.add_flags(cli, flags);                           // --workers, --mode
///   cli.parse(argc, argv);
///   schema.apply_flags(cli, flags, *cfg);                   // a given flag wins over the file
///   if (auto ok = schema.check_choices(*cfg); !ok) ...      // "key 'mode' is 'x': use sync or async"
///
/// A key's name is the YAML key and, with '_' written '-', the flag (`num_workers`,
/// `--num-workers`). The app keeps the checks that span keys (validate) and its nested
/// sections; a flat key is declared here and nowhere else. Standard C++ and header-only
/// libraries (yaml-cpp, CLI11, nlohmann-json): no runtime, no LibTorch.

#include <celer/error.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace celer::apps {

/// Levenshtein distance: insertions, deletions and substitutions of one character each.
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate nearest to `name`, when at most two edits away (ties: the first); "" when
/// none is that near.
[[nodiscard]] std::string_view closest_to(std::string_view name, std::span<const std::string_view> candidates);

/// "unknown key 'num_wrokers' <where>. Did you mean 'num_workers'? Valid keys: a, b, c."
/// (`where`: "in 'run'", "at the top level", or empty), to follow "file:line: ".
[[nodiscard]] std::string unknown_key_message(std::string_view name, std::string_view where,
                                              std::span<const std::string_view> valid);

/// "a, b or c".
[[nodiscard]] std::string either_of(std::span<const std::string_view> values);

/// The flag a key is given by: "--num-workers" for "num_workers".
[[nodiscard]] std::string flag_of(std::string_view key);

/// Sees each key's value with its type (config_schema::visit): what encodes a config for a
/// message, or decodes one, without spelling its keys again. A key of another type does not
/// compile (field() names it): add an overload here.
class field_visitor {
public:
  virtual ~field_visitor() = default;
  virtual void visit(std::string_view key, bool& v) = 0;
  virtual void visit(std::string_view key, int& v) = 0;
  virtual void visit(std::string_view key, std::uint32_t& v) = 0;
  virtual void visit(std::string_view key, std::int64_t& v) = 0;
  virtual void visit(std::string_view key, std::uint64_t& v) = 0;
  virtual void visit(std::string_view key, double& v) = 0;
  virtual void visit(std::string_view key, std::string& v) = 0;
  virtual void visit(std::string_view key, std::vector<std::string>& v) = 0;
  virtual void visit(std::string_view key, std::vector<double>& v) = 0;
};

/// A field_visitor that calls `f(key, value)` for every type: `f` is a generic lambda.
template <class F>
class visitor_of final : public field_visitor {
public:
  explicit visitor_of(F& f) : f_(f) {}
  void visit(std::string_view key, bool& v) override { f_(key, v); }
  void visit(std::string_view key, int& v) override { f_(key, v); }
  void visit(std::string_view key, std::uint32_t& v) override { f_(key, v); }
  void visit(std::string_view key, std::int64_t& v) override { f_(key, v); }
  void visit(std::string_view key, std::uint64_t& v) override { f_(key, v); }
  void visit(std::string_view key, double& v) override { f_(key, v); }
  void visit(std::string_view key, std::string& v) override { f_(key, v); }
  void visit(std::string_view key, std::vector<std::string>& v) override { f_(key, v); }
  void visit(std::string_view key, std::vector<double>& v) override { f_(key, v); }

private:
  F& f_;
};

/// One key of config type `Config`: what it is called and means, and how to read, write,
/// flag and copy it. Made by field() or list_field().
template <class Config>
struct config_key {
  std::string_view name;
  /// One line: --help's key list and the flag's help.
  std::string_view what;
  /// The values a text key may take (empty: any), and what the refusal adds after them.
  std::vector<std::string_view> choices;
  std::string_view choice_hint;
  /// Whether the key is also a command-line flag.
  bool flag = true;
  /// Reads the node into the config; false when the value has the wrong type.
  std::function<bool(const YAML::Node&, Config&)> read;
  /// A section's reader instead (section()): an error that says where (`source`, the line)
  /// and what is wrong.
  std::function<expected<void>(const YAML::Node&, Config&, std::string_view source)> read_section;
  /// Whether a flag of the key is ignored when a run is resumed (it keeps its saved value).
  bool fixed_on_resume = false;
  std::function<void(const Config&, nlohmann::ordered_json&)> write;
  /// Binds the key's flag to the field of `flags`.
  std::function<CLI::Option*(CLI::App&, Config& flags)> add_option;
  /// Copies the key's value from one config to another (a given flag's).
  std::function<void(const Config& from, Config& to)> copy;
  /// The key's value as text, for a choices key ("" otherwise).
  std::function<std::string(const Config&)> text;
  /// Shows the key's value, with its type, to a visitor.
  std::function<void(Config&, field_visitor&)> visit;

  /// The key takes only these values; a refusal says "use a, b or c" and then `hint`.
  config_key one_of(std::vector<std::string_view> values, std::string_view hint = {}) && {
    choices = std::move(values);
    choice_hint = hint;
    return std::move(*this);
  }
  /// The key is read from files only: no flag.
  config_key no_flag() && {
    flag = false;
    return std::move(*this);
  }
  /// A resumed run keeps the key's saved value; its flag is then ignored (and said so).
  config_key kept_on_resume() && {
    fixed_on_resume = true;
    return std::move(*this);
  }
  /// A section's flag: `--searcher tpe` sets the section's name (`c.*section.*name`), the
  /// text its choices (one_of) are checked against.
  template <class S>
  config_key named_by(S Config::*section, std::string S::*name) && {
    flag = true;
    add_option = [section, name, key = this->name, what = this->what](CLI::App& cli, Config& flags) {
      return cli.add_option(flag_of(key), flags.*section.*name, std::string(what));
    };
    copy = [section, name](const Config& from, Config& to) { to.*section.*name = from.*section.*name; };
    text = [section, name](const Config& c) -> std::string { return c.*section.*name; };
    return std::move(*this);
  }
};

/// A key whose value the app reads itself (a nested mapping, a list of structures): `read`
/// returns an error saying where and what, `write` adds the key's JSON. No flag (see
/// named_by), not visited.
template <class Config>
config_key<Config> section(std::string_view name, std::string_view what,
                           std::function<expected<void>(const YAML::Node&, Config&, std::string_view source)> read,
                           std::function<void(const Config&, nlohmann::ordered_json&)> write) {
  config_key<Config> k;
  k.name = name;
  k.what = what;
  k.flag = false;
  k.read_section = std::move(read);
  k.write = std::move(write);
  k.copy = [](const Config&, Config&) {};
  k.visit = [](Config&, field_visitor&) {};
  k.text = [](const Config&) { return std::string(); };
  return k;
}

/// A key whose value is one scalar (a number, a string, a bool).
template <class Config, class T>
config_key<Config> field(std::string_view name, T Config::*member, std::string_view what) {
  config_key<Config> k;
  k.name = name;
  k.what = what;
  k.read = [member](const YAML::Node& n, Config& c) {
    if (!n.IsScalar()) return false;
    return YAML::convert<T>::decode(n, c.*member);
  };
  k.write = [member, name](const Config& c, nlohmann::ordered_json& j) { j[std::string(name)] = c.*member; };
  k.add_option = [member, name, what](CLI::App& cli, Config& flags) {
    return cli.add_option(flag_of(name), flags.*member, std::string(what));
  };
  k.copy = [member](const Config& from, Config& to) { to.*member = from.*member; };
  k.visit = [member, name](Config& c, field_visitor& v) { v.visit(name, c.*member); };
  k.text = [member](const Config& c) -> std::string {
    if constexpr (std::is_convertible_v<T, std::string>) return c.*member;
    else return {};
  };
  return k;
}

/// A key whose value is a YAML list of scalars ([3, 1]): JSON writes an array, the flag
/// takes several values (--worker-speeds 3 1).
template <class Config, class T>
config_key<Config> list_field(std::string_view name, std::vector<T> Config::*member, std::string_view what) {
  config_key<Config> k = field(name, member, what);
  k.read = [member](const YAML::Node& n, Config& c) {
    if (!n.IsSequence()) return false;
    std::vector<T> v;
    for (const auto& item : n) {
      T x{};
      if (!item.IsScalar() || !YAML::convert<T>::decode(item, x)) return false;
      v.push_back(x);
    }
    c.*member = std::move(v);
    return true;
  };
  k.text = [](const Config&) { return std::string(); };
  return k;
}

/// The keys of one app's config (see the top of this file).
template <class Config>
class config_schema {
public:
  explicit config_schema(std::vector<config_key<Config>> keys) : keys_(std::move(keys)) {
    for (const auto& k : keys_) names_.push_back(k.name);
  }

  [[nodiscard]] const std::vector<config_key<Config>>& keys() const { return keys_; }

  /// Each key and its line, indented for a --help footer.
  [[nodiscard]] std::string help() const {
    std::ostringstream out;
    for (const auto& k : keys_) {
      std::string name(k.name);
      name.resize(std::max<std::size_t>(name.size() + 1, 20), ' ');
      out << "    " << name << k.what << "\n";
    }
    return out.str();
  }

  /// Reads YAML (or JSON) text over `start`; `source` names it in errors. invalid_argument
  /// naming the file, the line and the key for an unknown key (and the nearest one) or a
  /// value of the wrong type. Choices are checked by check_choices, after flags.
  [[nodiscard]] expected<Config> parse(std::string_view text, std::string_view source, Config start = {}) const {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      return invalid(std::string(source) + ": not YAML: " + e.what());
    }
    if (root.IsNull()) return start;
    if (!root.IsMap()) return invalid(std::string(source) + ": a config is a YAML mapping of keys to values");
    return read(root, source, {}, std::move(start));
  }

  /// Reads the keys of one YAML mapping over `start`: a whole config (parse), or the section
  /// `section` of another config ("run" in `run: {workers: 4}`) whose keys are declared in a
  /// schema of their own.
  [[nodiscard]] expected<Config> read(const YAML::Node& map, std::string_view source, std::string_view section,
                                      Config start) const {
    const std::string where = section.empty() ? std::string() : "in '" + std::string(section) + "'";
    if (!map.IsMap()) {
      return invalid(std::string(source) + ":" + std::to_string(map.Mark().line + 1) + ": " +
                     (section.empty() ? std::string("a config") : std::string(section)) +
                     " must be a mapping of keys to values");
    }
    for (const auto& it : map) {
      const auto name = it.first.as<std::string>();
      const auto at = std::string(source) + ":" + std::to_string(it.first.Mark().line + 1) + ": ";
      const auto* key = find(name);
      if (key == nullptr) return invalid(at + unknown_key_message(name, where, names_));
      if (key->read_section) {
        if (auto ok = key->read_section(it.second, start, source); !ok) return ok.error();
        continue;
      }
      if (!key->read(it.second, start)) {
        return invalid(at + "key '" + name + "' cannot be " +
                       (it.second.IsScalar() ? "'" + it.second.Scalar() + "'" : std::string("a list or mapping")) +
                       " (" + name + ": " + std::string(key->what) + ").");
      }
    }
    return start;
  }

  /// Reads a YAML file; not_found when it cannot be read.
  [[nodiscard]] expected<Config> load_file(const std::string& path, Config start = {}) const {
    std::ifstream in(path);
    if (!in) return error(error_code::not_found, "cannot read the config file " + path);
    std::stringstream text;
    text << in.rdbuf();
    return parse(text.str(), path, std::move(start));
  }

  /// Every key, in declaration order, as JSON text that parse reads back.
  [[nodiscard]] std::string to_json(const Config& c) const {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& k : keys_) k.write(c, j);
    return j.dump(2) + "\n";
  }

  /// Every key, in declaration order, as YAML that parse reads back: each under a comment
  /// with its line, values as JSON writes them (a subset of YAML). What --print-config
  /// prints: the effective config, a file to start from.
  [[nodiscard]] std::string to_yaml(const Config& c) const {
    std::ostringstream out;
    for (const auto& k : keys_) {
      nlohmann::ordered_json j = nlohmann::ordered_json::object();
      k.write(c, j);
      if (j.empty()) continue;
      out << "# " << k.what << "\n" << k.name << ": " << j.begin().value().dump() << "\n";
    }
    return out.str();
  }

  /// The first key holding a value outside its choices: "key 'mode' is 'x': use sync,
  /// async or hybrid".
  [[nodiscard]] expected<void> check_choices(const Config& c) const {
    for (const auto& k : keys_) {
      if (k.choices.empty()) continue;
      const auto v = k.text(c);
      if (std::find(k.choices.begin(), k.choices.end(), v) != k.choices.end()) continue;
      return invalid("key '" + std::string(k.name) + "' is '" + v + "': use " + either_of(k.choices) +
                     (k.choice_hint.empty() ? "" : " (" + std::string(k.choice_hint) + ")"));
    }
    return {};
  }

  /// Calls `f(key, value&)` for each key in order, `value` of the key's own type: e.g. to
  /// encode the config as a map for a message, or to decode one key by key.
  template <class F>
  void visit(Config& c, F&& f) const {
    visitor_of<std::remove_reference_t<F>> v(f);
    for (const auto& k : keys_) k.visit(c, v);
  }
  /// The same over a copy of `c` (its values can only be read).
  template <class F>
  void visit(const Config& c, F&& f) const {
    Config copy = c;
    visit(copy, [&f](std::string_view key, const auto& value) { f(key, value); });
  }

  /// A flag for each key that has one, bound to the fields of `flags`.
  void add_flags(CLI::App& cli, Config& flags) const {
    for (const auto& k : keys_)
      if (k.flag) k.add_option(cli, flags);
  }
  /// Copies each flag given on `cli` (parsed) from `flags` to `c`.
  void apply_flags(const CLI::App& cli, const Config& flags, Config& c) const {
    for (const auto& k : keys_)
      if (k.flag && cli.count(flag_of(k.name)) > 0) k.copy(flags, c);
  }
  /// The same for a resumed run's saved config: the keys kept_on_resume() keep their saved
  /// values; the flags given for them are returned (to say they were ignored).
  std::vector<std::string> apply_flags_on_resume(const CLI::App& cli, const Config& flags, Config& c) const {
    std::vector<std::string> ignored;
    for (const auto& k : keys_) {
      if (!k.flag || cli.count(flag_of(k.name)) == 0) continue;
      if (k.fixed_on_resume) {
        ignored.push_back(flag_of(k.name));
      } else {
        k.copy(flags, c);
      }
    }
    return ignored;
  }

private:
  static error invalid(std::string message) { return error(error_code::invalid_argument, std::move(message)); }
  const config_key<Config>* find(std::string_view name) const {
    for (const auto& k : keys_)
      if (k.name == name) return &k;
    return nullptr;
  }

  std::vector<config_key<Config>> keys_;
  std::vector<std::string_view> names_;
};

} // namespace celer::apps
