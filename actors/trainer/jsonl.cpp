// JSON Lines metrics: one object per step (metrics_log.hpp). nlohmann-json writes the
// JSON, so escaping and number formatting are never hand-rolled.
#include <celer/actors/trainer/metrics_log.hpp>

#include "buffered_file.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fcntl.h>
#include <filesystem>
#include <set>

namespace celer::trainer {
namespace fs = std::filesystem;

struct jsonl_writer::impl {
  explicit impl(const jsonl_options& o) : file(o.flush, o.clock) {}
  detail::buffered_file file;
};

jsonl_writer::jsonl_writer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
jsonl_writer::jsonl_writer(jsonl_writer&&) noexcept = default;
jsonl_writer& jsonl_writer::operator=(jsonl_writer&&) noexcept = default;
jsonl_writer::~jsonl_writer() {
  if (impl_) (void)impl_->file.close();  // an error here has nowhere to go; close() reports it
}

expected<jsonl_writer> jsonl_writer::open(jsonl_options opts) {
  if (opts.path.empty()) return error(error_code::invalid_argument, "jsonl_writer: path is empty");
  if (auto ok = detail::check_policy(opts.flush, "jsonl_writer"); !ok) return ok.error();
  const fs::path parent = fs::path(opts.path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) return detail::io_error(ec.value(), "making the folder", parent.string());
  }
  auto p = std::make_unique<impl>(opts);
  int err = 0;
  if (auto ok = p->file.open(opts.path, O_CREAT | O_APPEND | (opts.append ? 0 : O_TRUNC), err); !ok) {
    return ok.error();
  }
  return jsonl_writer(std::move(p));
}

expected<void> jsonl_writer::write(std::int64_t step, std::span<const scalar> values) {
  return write(step, {}, values);
}

expected<void> jsonl_writer::write(std::int64_t step, std::span<const text_field> texts,
                                   std::span<const scalar> values) {
  // Checked before anything is buffered, so a bad row leaves no half line.
  std::set<std::string_view> seen;
  auto check = [&](const std::string& tag) -> expected<void> {
    if (auto ok = detail::check_tag(tag); !ok) return ok;
    if (tag == "step" || tag == "wall_time") {
      return error(error_code::invalid_argument,
                   "jsonl_writer: \"" + tag + "\" is a column of its own; name the metric otherwise");
    }
    if (!seen.insert(tag).second) {
      return error(error_code::invalid_argument,
                   "jsonl_writer: the tag \"" + tag + "\" appears twice in step " + std::to_string(step));
    }
    return {};
  };
  for (const auto& t : texts) {
    if (auto ok = check(t.tag); !ok) return ok;
    // check_tag's UTF-8 rule, for the value (an empty value is fine).
    if (!t.value.empty())
      if (auto ok = detail::check_tag(t.value); !ok)
        return error(error_code::invalid_argument, "jsonl_writer: the text of \"" + t.tag + "\" is not UTF-8");
  }
  for (const auto& s : values)
    if (auto ok = check(s.tag); !ok) return ok;
  nlohmann::ordered_json row;
  row["step"] = step;
  row["wall_time"] = std::chrono::duration<double>(impl_->file.now().time_since_epoch()).count();
  for (const auto& t : texts) row[t.tag] = t.value;
  constexpr double exact_integers = 9007199254740992.0;  // 2^53: doubles are exact below
  for (const auto& s : values) {
    if (!std::isfinite(s.value)) {
      row[s.tag] = nullptr;
    } else if (std::fabs(s.value) < exact_integers && s.value == std::trunc(s.value)) {
      row[s.tag] = static_cast<std::int64_t>(s.value);
    } else {
      row[s.tag] = s.value;
    }
  }
  std::string line = row.dump();
  line.push_back('\n');
  return impl_->file.append(line);
}

expected<void> jsonl_writer::flush() { return impl_->file.flush(); }
expected<void> jsonl_writer::close() { return impl_->file.close(); }
const std::string& jsonl_writer::path() const noexcept { return impl_->file.path(); }

} // namespace celer::trainer
