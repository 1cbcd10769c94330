// The live progress table (progress.hpp).
#include "progress.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>

namespace celer::tune_app {
namespace {

constexpr std::size_t recent_events = 6;
/// Rows of a live table, so that it fits a terminal and can be redrawn in place.
constexpr std::size_t live_rows = 20;

std::string metric_text(std::optional<double> v) {
  if (!v) return "-";
  if (std::isnan(*v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", *v);
  return buf;
}

std::string stamp(double elapsed) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "[%7s] ", format_duration(elapsed).c_str());
  return buf;
}

} // namespace

progress::progress(std::ostream& out, bool tty, objective o, std::vector<std::string> param_columns,
                   std::string title, std::size_t num_samples)
  : out_(out), tty_(tty), objective_(std::move(o)), columns_(std::move(param_columns)), title_(std::move(title)),
    num_samples_(num_samples) {}

void progress::event(double elapsed, const std::string& what, const std::vector<trial_summary>* status_of) {
  if (tty_) {
    recent_.push_back(stamp(elapsed) + what);
    while (recent_.size() > recent_events) recent_.pop_front();
    return;
  }
  out_ << stamp(elapsed) << what << "\n";
  if (status_of) out_ << stamp(elapsed) << status_line(*status_of, elapsed) << "\n";
  out_.flush();
}

void progress::draw(const std::vector<trial_summary>& trials, double elapsed) {
  if (!tty_) return;
  std::string text = status_line(trials, elapsed) + "\n" + table(trials, live_rows);
  for (const auto& e : recent_) text += e + "\n";
  // Up to the first line of the last drawing, clear to the end of the screen, draw again.
  if (drawn_lines_ > 0) out_ << "\x1b[" << drawn_lines_ << "F\x1b[J";
  out_ << text;
  out_.flush();
  drawn_lines_ = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

void progress::close() {
  // The live drawing goes: the caller prints the final table in its place.
  if (tty_ && drawn_lines_ > 0) out_ << "\x1b[" << drawn_lines_ << "F\x1b[J";
  out_.flush();
  drawn_lines_ = 0;
  recent_.clear();
}

std::string progress::status_line(const std::vector<trial_summary>& trials, double elapsed) const {
  std::map<trial_state, std::size_t> counts;
  for (const auto& t : trials) ++counts[t.state];
  std::string states;
  for (auto s : {trial_state::running, trial_state::pending, trial_state::terminated, trial_state::stopped,
                 trial_state::error}) {
    if (counts[s] == 0 && s != trial_state::running) continue;
    states += (states.empty() ? "" : ", ") + std::to_string(counts[s]) + " " + std::string(to_string(s));
  }
  std::string line = "== " + title_ + ": " + states + " | " + std::to_string(trials.size()) + "/" +
                     std::to_string(num_samples_) + " trials | " + format_duration(elapsed);
  if (const auto* best = best_trial(trials, objective_)) {
    const auto i = *best->best_index(objective_);
    line += " | best " + objective_.metric + " " + metric_text(best->best(objective_)) + " (" + trial_name(best->id) +
            ", epoch " + std::to_string(best->results[i].epoch) + ")";
  }
  return line + " ==";
}

std::string progress::table(const std::vector<trial_summary>& all, std::size_t max_rows) const {
  // Running and pending first (by id), then finished ones by their best metric.
  std::vector<const trial_summary*> rows;
  for (const auto& t : all) rows.push_back(&t);
  std::stable_sort(rows.begin(), rows.end(), [&](const trial_summary* a, const trial_summary* b) {
    const bool la = !finished(a->state), lb = !finished(b->state);
    if (la != lb) return la;
    if (la) return a->id < b->id;
    const auto ba = a->best(objective_), bb = b->best(objective_);
    if (ba.has_value() != bb.has_value()) return ba.has_value();
    return ba && objective_.better(*ba, *bb);
  });
  std::size_t hidden = 0;
  std::map<trial_state, std::size_t> hidden_by_state;
  if (max_rows > 0 && rows.size() > max_rows) {
    for (std::size_t i = max_rows; i < rows.size(); ++i) ++hidden_by_state[rows[i]->state];
    hidden = rows.size() - max_rows;
    rows.resize(max_rows);
  }

  std::vector<std::string> header = {"trial", "state"};
  for (const auto& c : columns_) header.push_back(c);
  for (const char* h : {"epoch", "last", "best"}) header.emplace_back(h);
  std::vector<std::vector<std::string>> cells;
  for (const auto* t : rows) {
    std::vector<std::string> row = {trial_name(t->id), std::string(to_string(t->state))};
    for (const auto& c : columns_) {
      const auto* v = t->params.find(c);
      row.push_back(v ? format_value(*v) : "-");
    }
    row.push_back(t->results.empty() ? "-" : std::to_string(t->results.back().epoch));
    row.push_back(metric_text(t->last(objective_)));
    row.push_back(metric_text(t->best(objective_)));
    cells.push_back(std::move(row));
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
    for (const auto& row : cells) width[i] = std::max(width[i], row[i].size());
  }
  const auto line = [&](const std::vector<std::string>& row) {
    std::string s = "|";
    for (std::size_t i = 0; i < row.size(); ++i) {
      // Numbers right-aligned, words left-aligned.
      const bool numeric = i >= 2 && !row[i].empty() && (std::isdigit(static_cast<unsigned char>(row[i][0])) || row[i][0] == '-');
      const std::string pad(width[i] - row[i].size(), ' ');
      s += " " + (numeric ? pad + row[i] : row[i] + pad) + " |";
    }
    return s + "\n";
  };
  std::string rule = "+";
  for (auto w : width) rule += std::string(w + 2, '-') + "+";
  rule += "\n";
  std::string out = rule + line(header) + rule;
  for (const auto& row : cells) out += line(row);
  out += rule;
  if (hidden > 0) {
    out += "... " + std::to_string(hidden) + " more trials not shown (";
    bool first = true;
    for (auto [s, n] : hidden_by_state) {
      out += (first ? "" : ", ") + std::to_string(n) + " " + std::string(to_string(s));
      first = false;
    }
    out += ")\n";
  }
  return out;
}

} // namespace celer::tune_app
