#include "worker.hpp"

#include "input_parse.hpp"
#include "stages.hpp"

#include <celer/actors/preprocess/records.hpp>
#include <celer/actors/preprocess/sharding.hpp>
#include <celer/celer.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

namespace celer::preprocess::detail {

namespace {

std::string shape_text(std::initializer_list<std::uint32_t> dims) {
  std::string out;
  for (auto d : dims) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

/// The schema and payload of one item for output.field.
std::pair<std::string, std::string_view> payload_of(const item& it, const std::string& field,
                                                    std::string& scratch) {
  if (field == "values") {
    // An image turned to floats keeps its shape in the schema.
    const bool image = it.height > 0 && it.width > 0 &&
                       std::size_t{it.height} * it.width * std::max(1u, it.channels) ==
                         it.values.size();
    std::string schema =
      image ? "f32:" + shape_text({std::max(1u, it.channels), it.height, it.width})
            : "f32:" + std::to_string(it.values.size());
    return {std::move(schema), {reinterpret_cast<const char*>(it.values.data()),
                                it.values.size() * sizeof(float)}};
  }
  if (field == "pixels") {
    const auto c = std::max(1u, it.channels);
    std::string_view bytes(reinterpret_cast<const char*>(it.pixels.data()), it.pixels.size());
    if (c > 1) {  // stored height x width x channels; written channels first
      scratch.resize(it.pixels.size());
      const std::size_t plane = std::size_t{it.height} * it.width;
      for (std::size_t p = 0; p < plane; ++p)
        for (std::size_t k = 0; k < c; ++k) scratch[k * plane + p] = static_cast<char>(it.pixels[p * c + k]);
      bytes = scratch;
    }
    return {"u8:" + shape_text({c, it.height, it.width}), bytes};
  }
  if (field == "tokens")
    return {"u32:tokens", {reinterpret_cast<const char*>(it.tokens.data()),
                           it.tokens.size() * sizeof(std::uint32_t)}};
  return {"text", it.text};
}

} // namespace

expected<std::pair<std::string, std::string>> encode_records(const std::vector<item>& items,
                                                             const output_spec& output) {
  std::string scratch;
  std::string schema;
  if (!items.empty()) schema = payload_of(items.front(), output.field, scratch).first;
  auto w = record_writer::in_memory(schema);
  if (!w) return w.error();
  for (const auto& it : items) {
    auto [s, payload] = payload_of(it, output.field, scratch);
    if (s != schema)
      return error(error_code::invalid_argument,
                   "item " + it.key + " has output payload " + s + ", the block's first item " +
                     schema + ": every item must have the same shape");
    if (output.field == "pixels" && it.pixels.size() != std::size_t{it.height} * it.width *
                                                           std::max(1u, it.channels))
      return error(error_code::invalid_argument,
                   "item " + it.key + " has " + std::to_string(it.pixels.size()) +
                     " pixel bytes for a " + s.substr(3) + " image");
    if (auto ok = w->append(it.key, it.label, payload); !ok) return ok.error();
  }
  auto bytes = w->finish_in_memory();
  if (!bytes) return bytes.error();
  return std::pair{std::move(schema), std::move(*bytes)};
}

preprocess_worker::preprocess_worker(worker_spec spec)
    : spec_(std::move(spec)), cache_(spec_.cache_dir) {
  auto r = runner::make(spec_.spec);
  // The driver made the same runner before starting any worker, so this cannot fail.
  if (!r) throw celer::exception(r.error().code(), r.error().message());
  runner_ = std::move(*r);
}

std::uint64_t preprocess_worker::cache_key(std::uint32_t pass, std::uint64_t split_hash) const {
  // What made a pass's items: the input spec, the split's bytes, the stages up to the pass's
  // end and the fitted states they used. Later stages and the output do not matter, except
  // for the last pass, whose entry is the output records.
  const auto& p = spec_.spec;
  const bool last = pass + 1 == runner_.passes();
  std::size_t stages = p.stages.size();
  if (!last) {
    std::size_t fitted_seen = 0;
    for (std::size_t i = 0; i < p.stages.size(); ++i) {
      if (make_stage(p.stages[i].op, p.stages[i].params).value()->fitted() &&
          fitted_seen++ == pass) {
        stages = i;
        break;
      }
    }
  }
  std::string key = celer::detail::pack(p.input);
  key += celer::detail::pack(std::vector<stage_spec>(p.stages.begin(), p.stages.begin() + stages));
  if (last) key += celer::detail::pack(p.output);
  key += celer::detail::pack(std::vector<std::string>(
    fitted_.begin(), fitted_.begin() + std::min<std::size_t>(pass, fitted_.size())));
  key += std::to_string(pass) + ":" + std::to_string(split_hash);
  return stable_hash64(key, 0x626c6f636b);
}

expected<std::vector<item>> preprocess_worker::items_for(std::uint32_t pass, const split& s,
                                                         std::uint64_t split_hash, bool& cached,
                                                         std::uint64_t& items_read) {
  // The newest earlier pass whose items are cached, then the passes after it.
  std::uint32_t from = 0;
  std::vector<item> items;
  bool have = false;
  for (std::uint32_t k = pass; k-- > 0 && cache_.enabled();) {
    if (auto hit = cache_.load_items(cache_key(k, split_hash))) {
      items = std::move(hit->value);
      items_read = hit->items_read;
      from = k + 1;
      have = true;
      cached = true;
      break;
    }
  }
  if (!have) {
    auto read = read_split(spec_.spec.input, s);
    if (!read) return read.error();
    items = std::move(*read);
    items_read = items.size();
  }
  for (std::uint32_t k = from; k < pass; ++k) {
    auto part = runner_.run(k, items, fitted_);
    if (!part) return part.error();
    (void)cache_.store_items(cache_key(k, split_hash), items_read, items);  // a full disk loses the entry only
  }
  return items;
}

block_result preprocess_worker::process(std::uint32_t pass, std::uint64_t block, split s,
                                        celer::object_ref<std::vector<std::string>> fitted) {
  const auto started = std::chrono::steady_clock::now();
  block_result out;
  out.block = block;
  out.pass = pass;
  auto fail = [&](const error& e) {
    out.error = e.message();
    out.error_code = static_cast<std::uint8_t>(e.code());
    return out;
  };
  const bool last = pass + 1 == runner_.passes();
  if (last && spec_.crash && !celer::was_restarted() && ++last_pass_blocks_ >= spec_.crash_at_block &&
      ::getpid() != spec_.driver_pid)
    std::_Exit(71);  // the fault-tolerance test's worker death, mid-run
  if (!fitted_pass_ || *fitted_pass_ != pass) {
    fitted_ = celer::get(fitted);
    fitted_pass_ = pass;
  }
  auto split_hash = split_digest(spec_.spec.input, s);
  if (!split_hash) return fail(split_hash.error());
  if (last) {
    if (auto hit = cache_.load_records(cache_key(pass, *split_hash))) {
      if (auto reader = record_reader::view(hit->value, "a cached block")) {
        out.cached = true;
        out.items_in = hit->items_read;
        out.schema = std::string(reader->schema());
        out.items_out = reader->count();
        while (true) {
          auto rec = reader->next();
          if (!rec || !*rec) break;
          out.keys.add((*rec)->key);
        }
        out.records = celer::bytes(hit->value);
        out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        return out;
      }
    }
  }
  if (!last) {
    // This pass's items are cached: only the fitted stage's partial is left to compute.
    if (auto hit = cache_.load_items(cache_key(pass, *split_hash))) {
      auto part = runner_.partial(pass, hit->value);
      if (!part) return fail(part.error());
      out.cached = true;
      out.items_in = hit->items_read;
      out.items_out = hit->value.size();
      out.partial = std::move(*part);
      out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      return out;
    }
  }
  std::uint64_t items_read = 0;
  auto items = items_for(pass, s, *split_hash, out.cached, items_read);
  if (!items) return fail(items.error());
  out.items_in = items_read;
  auto part = runner_.run(pass, *items, fitted_);
  if (!part) return fail(part.error());
  out.items_out = items->size();
  if (!last) {
    out.partial = std::move(*part);
    (void)cache_.store_items(cache_key(pass, *split_hash), items_read, *items);
  } else {
    for (const auto& it : *items) out.keys.add(it.key);
    auto encoded = encode_records(*items, spec_.spec.output);
    if (!encoded) return fail(encoded.error());
    out.schema = std::move(encoded->first);
    (void)cache_.store_records(cache_key(pass, *split_hash), items_read, encoded->second);
    out.records = celer::bytes(encoded->second);
  }
  const double computed =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (spec_.slow_factor > 1)
    std::this_thread::sleep_for(std::chrono::duration<double>(computed * (spec_.slow_factor - 1)));
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

preprocess_worker* make_preprocess_worker(worker_spec spec) {
  return new preprocess_worker(std::move(spec));
}

} // namespace celer::preprocess::detail

CELER_REMOTE(celer::preprocess::detail::make_preprocess_worker,
             &celer::preprocess::detail::preprocess_worker::process);
