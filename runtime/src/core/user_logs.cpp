// Lines user code prints with celer::print (user_logs.hpp).
#include "core/user_logs.hpp"

#include "config/knobs.hpp"

#include <algorithm>
#include <cstdio>

namespace celer {

namespace {

/// `line` with its text cut to what one user_log carries.
void cut(protocol::log_line& line) {
  if (line.text.size() > protocol::user_log::max_text) {
    line.text.resize(protocol::user_log::max_text);
    line.text += " [cut]";
  }
}

} // namespace

std::string log_dedup::canonical(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c < '0' || c > '9') out.push_back(c);
  }
  const auto first = out.find_first_not_of(" \t\r");
  if (first == std::string::npos) return {};
  const auto last = out.find_last_not_of(" \t\r");
  return out.substr(first, last - first + 1);
}

std::string log_dedup::prefix(const protocol::log_line& line) {
  std::string out = "(" + (line.function.empty() ? std::string("worker") : line.function);
  if (!line.actor.nil()) out += " actor=" + line.actor.short_hex();
  out += " pid=" + std::to_string(line.pid);
  if (!line.node.nil()) out += " node=" + line.node.short_hex();
  return out + ") ";
}

std::optional<std::string> log_dedup::add(const protocol::log_line& line, time_point now) {
  if (!cfg_.dedup) return prefix(line) + line.text;
  auto key = canonical(line.text);
  if (key.empty()) return prefix(line) + line.text;
  auto it = seen_.find(key);
  if (it != seen_.end() && now - it->second.first < cfg_.window) {
    auto& s = it->second;
    // A worker's own lines are its own while it is the only one printing them.
    if (!s.several && s.source == line.worker) return prefix(line) + line.text;
    s.several = true;
    ++s.folded;
    s.last = line;
    return std::nullopt;
  }
  if (it != seen_.end()) seen_.erase(it);  // its window ended (expire() said what it folded)
  if (seen_.size() < max_kept) seen_.emplace(std::move(key), seen{now, line.worker, false, 0, line});
  return prefix(line) + line.text;
}

std::vector<std::string> log_dedup::expire(time_point now, bool all) {
  std::vector<std::string> out;
  for (auto it = seen_.begin(); it != seen_.end();) {
    if (!all && now - it->second.first < cfg_.window) {
      ++it;
      continue;
    }
    const auto& s = it->second;
    if (s.folded > 0) {
      out.push_back(prefix(s.last) + s.last.text + " [repeated " + std::to_string(s.folded) +
                    "x across cluster]");
    }
    it = seen_.erase(it);
  }
  return out;
}

user_logs::user_logs(clock now) : now_(std::move(now)) {}

void user_logs::print_to(sink s) {
  std::lock_guard lock(mutex_);
  sink_ = std::move(s);
}

void user_logs::write(const std::string& text) {
  if (sink_) {
    sink_(text);
    return;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void user_logs::show(std::vector<protocol::log_line> lines) {
  if (knobs().log_to_driver == 0) return;
  std::lock_guard lock(mutex_);
  if (!dedup_) {
    dedup_.emplace(log_dedup::config{.dedup = knobs().dedup_logs != 0,
                                     .window = std::chrono::milliseconds(std::max(0, knobs().log_dedup_window_ms))});
  }
  const auto now = now_();
  for (const auto& s : dedup_->expire(now)) write(s);
  for (auto& line : lines) {
    cut(line);
    if (auto out = dedup_->add(line, now)) write(*out);
  }
}

void user_logs::tick(bool all) {
  std::lock_guard lock(mutex_);
  if (!dedup_) return;
  for (const auto& s : dedup_->expire(now_(), all)) write(s);
}

void user_logs::print_plain(const std::string& text) {
  std::lock_guard lock(mutex_);
  write(text);
}

void user_logs::send(transport& net, const address& head, const job_id& job, protocol::log_line line) {
  cut(line);
  // The worker's own log has every line.
  const std::string own = log_dedup::prefix(line) + line.text + "\n";
  std::fwrite(own.data(), 1, own.size(), stderr);
  protocol::user_log m{job, {}};
  {
    std::lock_guard lock(mutex_);
    const auto now = now_();
    if (now - second_ >= std::chrono::seconds(1)) {
      if (held_back_ > 0) {
        protocol::log_line note = line;
        note.text = "[celer: " + std::to_string(held_back_) + " more lines printed here went to this worker's log only: over " +
                    std::to_string(lines_per_second) + " a second]";
        m.lines.push_back(std::move(note));
      }
      second_ = now;
      sent_ = 0;
      held_back_ = 0;
    }
    if (sent_ >= lines_per_second) {
      ++held_back_;
      return;
    }
    ++sent_;
  }
  m.lines.push_back(std::move(line));
  (void)net.send(head, std::move(m));
}

} // namespace celer
