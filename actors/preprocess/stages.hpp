#pragma once
// The stages a pipeline can name (pipeline.hpp), behind one table: each stage's parameters
// checked once, then its map step, or for a fitted stage its partial, merge and apply steps.
// Internal to actors/preprocess.
#include <celer/actors/preprocess/item.hpp>
#include <celer/error.hpp>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace celer::preprocess::detail {

/// A stage compiled from its spec: parameters parsed and checked.
class stage {
public:
  virtual ~stage() = default;
  /// Whether the stage needs the whole data set first (normalize, vocabulary, bpe, sample,
  /// rebalance).
  [[nodiscard]] virtual bool fitted() const noexcept { return false; }
  /// A map stage's work on one block; a fitted stage's apply step, given its fitted state.
  [[nodiscard]] virtual expected<void> apply(std::vector<item>& items,
                                             const std::string& fitted_state) const = 0;
  /// A fitted stage's partial result over one block (msgpack bytes).
  [[nodiscard]] virtual expected<std::string> partial(const std::vector<item>& items) const;
  /// Merges partial results (in any order: the result must not depend on it) into the state.
  [[nodiscard]] virtual expected<std::string> merge(const std::vector<std::string>& partials) const;
  /// A line about a fitted state, for people.
  [[nodiscard]] virtual std::string describe(const std::string& fitted_state) const;
};

/// Compiles `op` with `params`: invalid_argument naming an unknown op (and the known ones),
/// an unknown parameter or one that does not parse.
[[nodiscard]] expected<std::unique_ptr<stage>> make_stage(
  const std::string& op, const std::map<std::string, std::string>& params);

/// The ops, in the order the README lists them.
[[nodiscard]] const std::vector<std::string_view>& stage_names();

} // namespace celer::preprocess::detail
