#pragma once
/// Search spaces and parameter sets for tuning: what a trial's hyperparameters may be
/// (`search_space`), and one trial's values (`params`), printable and written to and read
/// from JSON so that an experiment can keep `params.json` per trial and resume. A `params`
/// travels to actors as itself (a msgpack map of its reals, integers and strings).
///
///   auto space = celer::tune::search_space{}
///                  .log_uniform("lr", 1e-4, 1e-1)
///                  .uniform("dropout", 0.0, 0.5)
///                  .integer("layers", 1, 4)
///                  .categorical("optimizer", {"adam", "sgd"})
///                  .grid("batch", {32, 64, 128});
///   if (auto ok = space.validate(); !ok) std::cerr << ok.error().message();
///
///   celer::tune::params p{{"lr", 0.01}, {"layers", 3}, {"optimizer", "adam"}};
///   std::cout << p;                       // {layers=3, lr=0.01, optimizer="adam"}
///   auto back = celer::tune::params::from_json(p.to_json());   // expected<params>
///
/// No random choice here: the searchers (search.hpp) draw from a space with a seeded
/// std::mt19937_64, so a resumed experiment can replay them.

#include <celer/codec.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <type_traits>
#include <variant>
#include <vector>

namespace celer::tune {

/// One hyperparameter's value: a real number, an integer or a string. Integers stay
/// integers through JSON (`3`), reals stay reals (`3.0`).
using value = std::variant<double, std::int64_t, std::string>;

/// A value as it prints: the shortest text that reads back as the same double (`0.001`,
/// `3.0`), the integer (`3`), or the string in double quotes (`"adam"`).
[[nodiscard]] std::string to_string(const value& v);

/// Whether two values are equal, comparing a real and an integer by number (1 == 1.0).
[[nodiscard]] bool same_value(const value& a, const value& b);

/// One trial's hyperparameters: names to values, ordered by name.
class params {
public:
  using map_type = std::map<std::string, value, std::less<>>;

  params() = default;
  params(std::initializer_list<map_type::value_type> values) : values_(values) {}

  /// Sets (or replaces) `name`.
  void set(std::string name, value v) { values_.insert_or_assign(std::move(name), std::move(v)); }
  /// The value of `name`, or nullptr.
  [[nodiscard]] const value* find(std::string_view name) const;
  /// `name` as a real number (an integer converts); not_found or invalid_argument otherwise.
  [[nodiscard]] expected<double> number(std::string_view name) const;
  /// `name` as an integer (a real with no fraction converts); an error otherwise.
  [[nodiscard]] expected<std::int64_t> integer(std::string_view name) const;
  /// `name` as a string; an error otherwise.
  [[nodiscard]] expected<std::string> text(std::string_view name) const;

  [[nodiscard]] std::size_t size() const noexcept { return values_.size(); }
  [[nodiscard]] bool empty() const noexcept { return values_.empty(); }
  [[nodiscard]] map_type::const_iterator begin() const noexcept { return values_.begin(); }
  [[nodiscard]] map_type::const_iterator end() const noexcept { return values_.end(); }
  friend bool operator==(const params&, const params&) = default;

  /// A JSON object, `{"layers":3,"lr":0.01,"optimizer":"adam"}`; reals are written with
  /// enough digits to read back exactly. A non-finite real is written as null (JSON has no
  /// NaN), which from_json refuses.
  [[nodiscard]] std::string to_json() const;
  /// Reads what to_json wrote. invalid_argument, naming the key, for text that is not a
  /// JSON object of numbers and strings, or an integer beyond the int64 range.
  [[nodiscard]] static expected<params> from_json(std::string_view json);

private:
  map_type values_;
};

/// `{layers=3, lr=0.01, optimizer="adam"}`.
[[nodiscard]] std::string to_string(const params& p);
std::ostream& operator<<(std::ostream& out, const params& p);

/// How a parameter is drawn.
enum class distribution : unsigned char {
  uniform,      ///< a real in [low, high]
  log_uniform,  ///< a real in [low, high], uniform in log(x); low > 0
  integer,      ///< an integer in [low, high], each equally likely
  log_integer,  ///< an integer in [low, high], uniform in log(x); low >= 1
  categorical,  ///< one of `choices`, unordered to the searchers; neighbours to PBT
  grid,         ///< one of `choices`; the grid searcher enumerates them, others pick one
};

/// "uniform", "log_uniform", ...
[[nodiscard]] std::string_view to_string(distribution d) noexcept;

/// One hyperparameter of a space.
struct parameter {
  std::string name;
  distribution kind = distribution::uniform;
  /// Bounds, inclusive, of the numeric kinds (integers as exact doubles).
  double low = 0;
  double high = 0;
  /// The values of categorical and grid parameters, in order.
  std::vector<value> choices;

  [[nodiscard]] bool numeric() const noexcept {
    return kind != distribution::categorical && kind != distribution::grid;
  }
  [[nodiscard]] bool log() const noexcept {
    return kind == distribution::log_uniform || kind == distribution::log_integer;
  }
  [[nodiscard]] bool integral() const noexcept {
    return kind == distribution::integer || kind == distribution::log_integer;
  }
  /// The index of `v` in `choices` (numbers compared by value), or nothing.
  [[nodiscard]] std::optional<std::size_t> index_of(const value& v) const;
};

/// The hyperparameters of an experiment, in the order they were declared. Built by chaining;
/// a mistake is reported by validate() (and by every searcher and scheduler given the space),
/// never by the builder calls.
class search_space {
public:
  search_space& uniform(std::string name, double low, double high);
  search_space& log_uniform(std::string name, double low, double high);
  /// Integers in [low, high]; with `log`, uniform in log(x) (low must be >= 1).
  search_space& integer(std::string name, std::int64_t low, std::int64_t high, bool log = false);
  search_space& categorical(std::string name, std::vector<value> choices);
  /// Values the grid searcher enumerates (Ray Tune's grid_search); random and TPE treat them
  /// as a categorical.
  search_space& grid(std::string name, std::vector<value> values);

  /// invalid_argument, naming the parameter and the fault, for: no parameters, an empty or
  /// repeated name, a non-finite bound, low >= high, a log parameter with low <= 0, an empty
  /// categorical or grid, a repeated choice or a non-finite real among the choices.
  [[nodiscard]] expected<void> validate() const;

  /// Whether `p` has a value for every parameter, of its kind, within its bounds or among its
  /// choices (extra names in `p` are allowed). invalid_argument saying which and why.
  [[nodiscard]] expected<void> check(const params& p) const;

  [[nodiscard]] const std::vector<parameter>& parameters() const noexcept { return parameters_; }
  [[nodiscard]] const parameter* find(std::string_view name) const;
  [[nodiscard]] std::size_t size() const noexcept { return parameters_.size(); }

private:
  std::vector<parameter> parameters_;
};

} // namespace celer::tune

// A params travels as a map of three maps, each name under its value's type: {"real": {"lr":
// 0.001}, "int": {"layers": 3}, "text": {"optimizer": "adam"}}. By type, because msgpack
// writes an integral double as an integer: 3.0 stays a real. Anything else is refused
// (type_error), as is an integer past int64.
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <>
struct pack<celer::tune::params> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::tune::params& p) const {
    auto section = [&](const char* name, auto type) {
      using T = decltype(type);
      std::uint32_t n = 0;
      for (const auto& [key, v] : p) n += std::holds_alternative<T>(v) ? 1 : 0;
      o.pack(name);
      o.pack_map(n);
      for (const auto& [key, v] : p) {
        if (const auto* x = std::get_if<T>(&v)) {
          o.pack(key);
          o.pack(*x);
        }
      }
    };
    o.pack_map(3);
    section("real", double{});
    section("int", std::int64_t{});
    section("text", std::string{});
    return o;
  }
};

template <>
struct convert<celer::tune::params> {
  const msgpack::object& operator()(const msgpack::object& o, celer::tune::params& p) const {
    if (o.type != msgpack::type::MAP) throw msgpack::type_error();
    celer::tune::params out;
    for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
      const auto& section = o.via.map.ptr[i];
      if (section.val.type != msgpack::type::MAP) throw msgpack::type_error();
      const auto type = section.key.as<std::string>();
      for (std::uint32_t j = 0; j < section.val.via.map.size; ++j) {
        const auto& kv = section.val.via.map.ptr[j];
        auto name = kv.key.as<std::string>();
        if (type == "real" && (kv.val.type == msgpack::type::FLOAT64 || kv.val.type == msgpack::type::FLOAT32 ||
                               kv.val.type == msgpack::type::POSITIVE_INTEGER ||
                               kv.val.type == msgpack::type::NEGATIVE_INTEGER)) {
          out.set(std::move(name), kv.val.as<double>());
        } else if (type == "int" && (kv.val.type == msgpack::type::POSITIVE_INTEGER ||
                                     kv.val.type == msgpack::type::NEGATIVE_INTEGER)) {
          out.set(std::move(name), kv.val.as<std::int64_t>());
        } else if (type == "text" && kv.val.type == msgpack::type::STR) {
          out.set(std::move(name), kv.val.as<std::string>());
        } else {
          throw msgpack::type_error();
        }
      }
    }
    p = std::move(out);
    return o;
  }
};

} // namespace adaptor
} // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
} // namespace msgpack
