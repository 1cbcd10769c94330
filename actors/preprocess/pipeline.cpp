#include <celer/actors/preprocess/pipeline.hpp>
#include <celer/actors/preprocess/sharding.hpp>

#include "stages.hpp"

#include <celer/codec.hpp>

#include <algorithm>
#include <cstdio>

namespace celer::preprocess {

std::string_view input_format_name(input_format f) noexcept {
  switch (f) {
  case input_format::csv: return "csv";
  case input_format::jsonl: return "jsonl";
  case input_format::text: return "text";
  case input_format::idx: return "idx";
  }
  return "?";
}

expected<input_format> parse_input_format(std::string_view name) {
  for (auto f : {input_format::csv, input_format::jsonl, input_format::text, input_format::idx})
    if (name == input_format_name(f)) return f;
  return error(error_code::invalid_argument,
               "unknown input format '" + std::string(name) + "' (csv, jsonl, text or idx)");
}

pipeline& pipeline::stage(std::string op, std::map<std::string, std::string> params) {
  stages.push_back({std::move(op), std::move(params)});
  return *this;
}

namespace {

error at_stage(std::size_t i, const stage_spec& s, const error& e) {
  return error(e.code(), "stage " + std::to_string(i + 1) + " (" + s.op + "): " + e.message());
}

bool known_field(std::string_view f) {
  return f == "values" || f == "pixels" || f == "tokens" || f == "text";
}

} // namespace

expected<void> pipeline::validate() const {
  if (input.paths.empty())
    return error(error_code::invalid_argument, "input: no files (input.paths is empty)");
  if (input.format == input_format::idx && input.labels.empty())
    return error(error_code::invalid_argument,
                 "input: an idx input needs its labels file (input.labels)");
  if (input.block_items == 0)
    return error(error_code::invalid_argument, "input.block_items must be at least 1");
  for (std::size_t i = 0; i < stages.size(); ++i)
    if (auto s = detail::make_stage(stages[i].op, stages[i].params); !s)
      return at_stage(i, stages[i], s.error());
  if (!known_field(output.field))
    return error(error_code::invalid_argument, "output.field '" + output.field +
                                                   "' is not values, pixels, tokens or text");
  if (output.shards == 0)
    return error(error_code::invalid_argument, "output.shards must be at least 1");
  if (output.shard_by != "key" && output.shard_by != "category" &&
      output.shard_by != "category_size")
    return error(error_code::invalid_argument, "output.shard_by '" + output.shard_by +
                                                   "' is not key, category or category_size");
  return {};
}

std::string pipeline::hash() const {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx",
                static_cast<unsigned long long>(stable_hash64(celer::detail::pack(*this), 0x636667)));
  return out;
}

expected<runner> runner::make(const pipeline& p) {
  if (auto ok = p.validate(); !ok) return ok.error();
  runner r;
  r.spec_ = p;
  pass_range current;
  for (std::size_t i = 0; i < p.stages.size(); ++i) {
    auto s = detail::make_stage(p.stages[i].op, p.stages[i].params);
    if (!s) return at_stage(i, p.stages[i], s.error());
    const bool fitted = (*s)->fitted();
    r.stages_.push_back(std::shared_ptr<const detail::stage>(std::move(*s)));
    if (fitted) {
      current.fitted_stage = i;
      current.ends_in_fit = true;
      r.passes_.push_back(current);
      // The next pass starts by applying this stage's fitted state.
      current = pass_range{.first = i};
    }
  }
  current.fitted_stage = p.stages.size();
  current.ends_in_fit = false;
  r.passes_.push_back(current);
  return r;
}

expected<std::string> runner::run(std::size_t pass, std::vector<item>& items,
                                  const std::vector<std::string>& fitted) const {
  if (pass >= passes_.size())
    return error(error_code::invalid_argument, "pass " + std::to_string(pass) + " of " +
                                                   std::to_string(passes_.size()));
  const auto& range = passes_[pass];
  // Which fitted state each fitted stage before this pass's end uses: the k-th fitted
  // stage has fitted[k].
  std::size_t fitted_index = 0;
  for (std::size_t i = 0; i < range.first; ++i)
    if (stages_[i]->fitted()) ++fitted_index;
  for (std::size_t i = range.first; i < range.fitted_stage; ++i) {
    const auto& st = *stages_[i];
    static const std::string none;
    const std::string* state = &none;
    if (st.fitted()) {
      if (fitted_index >= fitted.size())
        return error(error_code::failed_precondition,
                     "stage " + std::to_string(i + 1) + " (" + spec_.stages[i].op +
                       ") has no fitted state: its pass did not run");
      state = &fitted[fitted_index++];
    }
    if (auto ok = st.apply(items, *state); !ok) return at_stage(i, spec_.stages[i], ok.error());
  }
  if (!range.ends_in_fit) return std::string{};
  auto part = stages_[range.fitted_stage]->partial(items);
  if (!part) return at_stage(range.fitted_stage, spec_.stages[range.fitted_stage], part.error());
  return part;
}

expected<std::string> runner::partial(std::size_t pass, const std::vector<item>& items) const {
  if (pass >= passes_.size())
    return error(error_code::invalid_argument, "pass " + std::to_string(pass) + " of " +
                                                   std::to_string(passes_.size()));
  const auto& range = passes_[pass];
  if (!range.ends_in_fit) return std::string{};
  auto part = stages_[range.fitted_stage]->partial(items);
  if (!part) return at_stage(range.fitted_stage, spec_.stages[range.fitted_stage], part.error());
  return part;
}

expected<std::string> runner::fit(std::size_t pass, const std::vector<std::string>& partials) const {
  if (pass >= passes_.size() || !passes_[pass].ends_in_fit)
    return error(error_code::invalid_argument,
                 "pass " + std::to_string(pass) + " does not end in a fitted stage");
  const auto i = passes_[pass].fitted_stage;
  auto state = stages_[i]->merge(partials);
  if (!state) return at_stage(i, spec_.stages[i], state.error());
  return state;
}

std::string runner::describe_fitted(std::size_t pass, const std::string& fitted) const {
  if (pass >= passes_.size() || !passes_[pass].ends_in_fit) return {};
  const auto i = passes_[pass].fitted_stage;
  return spec_.stages[i].op + ": " + stages_[i]->describe(fitted);
}

expected<std::vector<item>> run_local(const pipeline& p) {
  auto r = runner::make(p);
  if (!r) return r.error();
  auto splits = plan_splits(p.input);
  if (!splits) return splits.error();
  std::vector<std::vector<item>> blocks;
  for (const auto& s : *splits) {
    auto items = read_split(p.input, s);
    if (!items) return items.error();
    blocks.push_back(std::move(*items));
  }
  std::vector<std::string> fitted;
  for (std::size_t pass = 0; pass < r->passes(); ++pass) {
    std::vector<std::string> partials;
    for (auto& b : blocks) {
      auto part = r->run(pass, b, fitted);
      if (!part) return part.error();
      partials.push_back(std::move(*part));
    }
    if (pass + 1 < r->passes()) {
      auto state = r->fit(pass, partials);
      if (!state) return state.error();
      fitted.push_back(std::move(*state));
    }
  }
  std::vector<item> out;
  for (auto& b : blocks)
    for (auto& it : b) out.push_back(std::move(it));
  return out;
}

} // namespace celer::preprocess
