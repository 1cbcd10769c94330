#include <celer/actors/preprocess/executor.hpp>
#include <celer/actors/preprocess/manifest.hpp>
#include <celer/actors/preprocess/records.hpp>
#include <celer/actors/preprocess/sharding.hpp>

#include "worker.hpp"

#include <celer/celer.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <unistd.h>

namespace celer::preprocess {

namespace {

using detail::block_result;
using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// The output shards, written in block order (so the files do not depend on which worker
/// finished first): records go to a shard by key (a consistent-hash ring of the shards), or
/// per category (the label) in turn, or per category to the shard with fewest of its bytes.
class shard_writer {
public:
  static expected<shard_writer> make(const std::string& dir, const output_spec& out) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return error(error_code::unavailable, "cannot make the output folder " + dir + ": " + ec.message());
    shard_writer w;
    w.dir_ = dir;
    w.spec_ = out;
    w.ring_ = hash_ring(ring_options{});
    for (std::uint32_t s = 0; s < out.shards; ++s) {
      char name[40];
      std::snprintf(name, sizeof name, "shard-%05u-of-%05u.rec", s, out.shards);
      w.names_.emplace_back(name);
      (void)w.ring_.add(name);
    }
    return w;
  }

  /// Takes block `b`'s result; writes it and every later block already here, in order.
  expected<void> add(std::uint64_t b, block_result r) {
    waiting_.emplace(b, std::move(r));
    while (!waiting_.empty() && waiting_.begin()->first == next_) {
      auto node = waiting_.extract(waiting_.begin());
      if (auto ok = write(node.mapped()); !ok) return ok;
      ++next_;
    }
    return {};
  }

  expected<std::vector<std::string>> finish() {
    if (schema_.empty()) schema_ = "empty";
    if (writers_.empty())
      if (auto ok = open_all(); !ok) return ok.error();
    for (auto& w : writers_)
      if (auto ok = w.finish(); !ok) return ok.error();
    return names_;
  }

  [[nodiscard]] const std::string& schema() const noexcept { return schema_; }
  [[nodiscard]] const std::vector<std::uint64_t>& counts() const noexcept { return counts_; }
  [[nodiscard]] const std::vector<std::uint64_t>& bytes() const noexcept { return bytes_; }
  [[nodiscard]] int classes() const noexcept { return max_label_ + 1; }
  [[nodiscard]] double worst_skew() const {
    double worst = 0;
    for (const auto& [label, per] : per_label_) {
      double total = 0;
      for (auto n : per) total += static_cast<double>(n);
      const double fair = total / static_cast<double>(per.size());
      for (auto n : per) worst = std::max(worst, std::abs(static_cast<double>(n) - fair) / fair);
    }
    return worst;
  }

private:
  expected<void> open_all() {
    for (const auto& n : names_) {
      auto w = record_writer::create(dir_ + "/" + n, schema_);
      if (!w) return w.error();
      writers_.push_back(std::move(*w));
    }
    counts_.assign(names_.size(), 0);
    bytes_.assign(names_.size(), 0);
    return {};
  }

  std::size_t shard_for(std::string_view key, std::int32_t label, std::size_t size) {
    if (spec_.shard_by == "key") return shard_of_name_.at(std::string(*ring_.owner(key)));
    auto& per = by_label_[label];
    if (spec_.shard_by == "category") return per.turn++ % names_.size();
    if (per.bytes.empty()) per.bytes.assign(names_.size(), 0);
    std::size_t best = 0;
    for (std::size_t s = 1; s < per.bytes.size(); ++s)
      if (per.bytes[s] < per.bytes[best]) best = s;
    per.bytes[best] += size;
    return best;
  }

  expected<void> write(const block_result& r) {
    if (r.items_out == 0) return {};
    if (schema_.empty()) {
      schema_ = r.schema;
      for (std::size_t s = 0; s < names_.size(); ++s) shard_of_name_[names_[s]] = s;
      if (auto ok = open_all(); !ok) return ok;
    } else if (r.schema != schema_) {
      return error(error_code::invalid_argument,
                   "block " + std::to_string(r.block) + "'s items have payload " + r.schema +
                     ", earlier blocks' " + schema_ + ": every item must have the same shape");
    }
    auto reader = record_reader::view(r.records.view(), "block " + std::to_string(r.block));
    if (!reader) return reader.error();
    while (true) {
      auto rec = reader->next();
      if (!rec) return rec.error();
      if (!*rec) break;
      const auto& v = **rec;
      max_label_ = std::max(max_label_, v.label);
      const auto s = shard_for(v.key, v.label, v.payload.size());
      if (auto ok = writers_[s].append(v.key, v.label, v.payload); !ok) return ok;
      ++counts_[s];
      auto& per = per_label_[v.label];
      if (per.empty()) per.assign(names_.size(), 0);
      ++per[s];
    }
    return {};
  }

  struct label_state {
    std::size_t turn = 0;
    std::vector<std::uint64_t> bytes;
  };
  std::string dir_;
  output_spec spec_;
  hash_ring ring_;
  std::vector<std::string> names_;
  std::map<std::string, std::size_t> shard_of_name_;
  std::vector<record_writer> writers_;
  std::vector<std::uint64_t> counts_, bytes_;
  std::map<std::int32_t, label_state> by_label_;
  std::map<std::int32_t, std::vector<std::uint64_t>> per_label_;  // records per shard
  std::map<std::uint64_t, block_result> waiting_;
  std::uint64_t next_ = 0;
  std::string schema_;
  std::int32_t max_label_ = -1;
};

bool is_death(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const actor_died_error&) {
    return true;
  } catch (const worker_died_error&) {
    return true;
  } catch (const node_died_error&) {
    return true;
  } catch (...) {
    return false;
  }
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

} // namespace

expected<run_result> run_pipeline(const pipeline& p, const run_options& o) {
  const auto started = clock_type::now();
  auto r = runner::make(p);
  if (!r) return r.error();
  if (o.workers == 0) return error(error_code::invalid_argument, "run_pipeline: workers is 0");
  if (o.output_dir.empty()) return error(error_code::invalid_argument, "run_pipeline: no output_dir");
  auto splits = plan_splits(p.input);
  if (!splits) return splits.error();
  std::vector<double> costs;
  for (const auto& s : *splits)
    costs.push_back(static_cast<double>(std::max<std::uint64_t>(1, s.end - s.begin)));
  auto writer = shard_writer::make(o.output_dir, p.output);
  if (!writer) return writer.error();

  std::vector<std::string> names;
  std::vector<actor_handle<detail::preprocess_worker>> workers;
  for (std::size_t i = 0; i < o.workers; ++i) {
    names.push_back("w" + std::to_string(i));
    detail::worker_spec spec{.spec = p,
                             .index = static_cast<std::uint32_t>(i),
                             .cache_dir = o.cache_dir,
                             .slow_factor = static_cast<int>(i) == o.slow_worker ? o.slow_factor : 1,
                             .crash = static_cast<int>(i) == o.crash_worker,
                             .crash_at_block = o.crash_at_block,
                             .driver_pid = ::getpid()};
    actor_options ao{.num_cpus = o.cpus_per_worker, .max_restarts = o.max_worker_restarts};
    if (o.spread) ao.scheduling = scheduling_strategy::spread();
    workers.push_back(celer::actor(detail::make_preprocess_worker).options(ao).remote(spec));
  }

  // The workers go when the run ends, however it ends (an error returns from the middle).
  struct stop_workers {
    std::vector<actor_handle<detail::preprocess_worker>>& workers;
    ~stop_workers() {
      for (auto& w : workers) {
        try {
          celer::kill(w);
        } catch (const std::exception&) {
          // Already gone with the runtime: nothing to stop.
        }
      }
    }
  } stop{workers};

  run_result result;
  result.config_hash = p.hash();
  std::vector<std::string> fitted;
  std::vector<int> restarts(o.workers, 0), generation(o.workers, 0);
  run_progress progress;
  progress.passes = r->passes();
  for (std::uint32_t pass = 0; pass < r->passes(); ++pass) {
    const auto pass_started = clock_type::now();
    const bool last = pass + 1 == r->passes();
    auto q = work_queue::make(costs, names, o.queue);
    if (!q) return q.error();
    auto fitted_ref = celer::put(fitted);
    struct in_flight {
      object_ref<block_result> ref;
      std::size_t worker;
      std::uint64_t block;
      int generation;  // the worker's life it was sent to
    };
    std::vector<in_flight> flying;
    std::vector<std::size_t> held(o.workers, 0);
    std::vector<std::string> partials(splits->size());
    auto refill = [&](std::size_t w) {
      while (held[w] < std::max<std::size_t>(1, o.prefetch)) {
        auto b = q->take(names[w]);
        if (!b) return;
        flying.push_back({workers[w].task(&detail::preprocess_worker::process)
                            .remote(pass, *b, (*splits)[*b], fitted_ref),
                          w, *b, generation[w]});
        ++held[w];
      }
    };
    for (std::size_t w = 0; w < o.workers; ++w) refill(w);
    progress.pass = pass;
    while (!q->finished()) {
      if (flying.empty())
        return error(error_code::unavailable,
                     "every preprocessing worker died more than max_worker_restarts (" +
                       std::to_string(o.max_worker_restarts) + ") times; " +
                       std::to_string(q->stats().blocks - q->stats().done) + " blocks not done");
      std::vector<object_ref<block_result>> refs;
      refs.reserve(flying.size());
      for (const auto& f : flying) refs.push_back(f.ref);
      auto ready = celer::wait(refs, 1).ready;
      for (const auto& ref : ready) {
        auto it = std::find_if(flying.begin(), flying.end(), [&](const auto& f) { return f.ref == ref; });
        const auto f = *it;
        flying.erase(it);
        --held[f.worker];
        block_result res;
        try {
          res = celer::get(f.ref);
        } catch (...) {
          const auto e = std::current_exception();
          if (!is_death(e)) return error(error_code::internal, "block " + std::to_string(f.block) + ": " + message_of(e));
          // The worker died: its blocks go to the others, and it comes back if it may. Its
          // other calls of the same life fail too; they were given back already.
          if (f.generation == generation[f.worker]) {
            q->fail(names[f.worker]);
            ++progress.worker_failures;
            ++generation[f.worker];
            if (restarts[f.worker]++ < o.max_worker_restarts) q->revive(names[f.worker]);
          }
          for (std::size_t w = 0; w < o.workers; ++w) refill(w);
          continue;
        }
        if (!res.error.empty())
          return error(static_cast<error_code>(res.error_code),
                       "block " + std::to_string(f.block) + " (" + p.input.paths[(*splits)[f.block].file] +
                         "): " + res.error);
        if (q->done(names[f.worker], f.block, res.seconds)) {
          progress.cache_hits += res.cached ? 1 : 0;
          if (pass == 0) progress.items_in += res.items_in;  // items read from the input
          if (last) {
            progress.items_out += res.items_out;
            result.keys.merge(res.keys);
            if (auto ok = writer->add(f.block, std::move(res)); !ok) return ok.error();
          } else {
            partials[f.block] = std::move(res.partial);
          }
        }
        refill(f.worker);
      }
      progress.queue = q->stats();
      progress.seconds = since(started);
      if (o.on_progress) o.on_progress(progress);
    }
    pass_figures figures{.seconds = since(pass_started), .queue = q->stats(),
                         .blocks_by_worker = q->done_by_worker(), .fitted = {}};
    if (!last) {
      auto state = r->fit(pass, partials);
      if (!state) return state.error();
      figures.fitted = r->describe_fitted(pass, *state);
      fitted.push_back(std::move(*state));
    }
    result.passes.push_back(std::move(figures));
  }
  auto files = writer->finish();
  if (!files) return files.error();
  result.items_in = progress.items_in;
  result.items = progress.items_out;
  result.shard_files = *files;
  result.schema = writer->schema();
  result.worker_failures = progress.worker_failures;
  result.cache_hits = progress.cache_hits;
  result.shard_records = writer->counts();
  result.worst_category_skew = writer->worst_skew();

  manifest m;
  m.schema = result.schema;
  if (auto shape = parse_schema_shape(m.schema)) m.sample_shape = *shape;
  m.classes = p.output.label_names.empty() ? std::max(0, writer->classes())
                                           : static_cast<int>(p.output.label_names.size());
  m.label_names = p.output.label_names;
  m.items = result.items;
  m.key_checksum = result.keys.hex();
  m.config_hash = result.config_hash;
  for (std::size_t s = 0; s < files->size(); ++s) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(o.output_dir + "/" + (*files)[s], ec);
    m.shards.push_back({(*files)[s], writer->counts().empty() ? 0 : writer->counts()[s],
                        ec ? 0 : static_cast<std::uint64_t>(size)});
  }
  if (auto ok = write_manifest(o.output_dir, m); !ok) return ok.error();
  result.seconds = since(started);
  if (o.on_progress) {
    progress.seconds = result.seconds;
    o.on_progress(progress);
  }
  return result;
}

} // namespace celer::preprocess
