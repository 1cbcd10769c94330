// The head's cluster subscriptions (cluster_subscriptions.hpp).
#include "head/cluster_subscriptions.hpp"

#include <algorithm>

namespace celer {

cluster_subscriptions::cluster_subscriptions(transport& net, head_tables* tables, head_guard& guard,
                                             head_events& events)
  : net_(net), tables_(tables), guard_(guard) {
  events.on_node_died([this](const node_id& id, const std::string& reason) {
    const protocol::node_died died{id, reason};
    for (const auto& s : subscribers_) (void)net_.send(s, died);
  });
  events.on_job_ended([this](const job_id& job) { job_ended(job); });
}

void cluster_subscriptions::restore(std::vector<address> rows) {
  subscribers_ = std::move(rows);
  for (const auto& a : subscribers_) {
    job_id job;
    if (const auto at = a.endpoint.rfind("#job="); at != std::string::npos) {
      job = job_id::parse(std::string_view(a.endpoint).substr(at + 5)).value_or(job_id{});
    }
    if (job_of_.emplace(a.endpoint, job).second && !job.nil()) ++per_job_[job];
  }
}

void cluster_subscriptions::on(protocol::subscribe_cluster& m) {
  const auto& endpoint = m.subscriber.endpoint;
  if (job_of_.contains(endpoint)) return;  // subscribed already (a resend)
  if (!m.sender_job.nil()) {
    if (!guard_.endpoint_ok(m.subscriber, m.sender_job, "subscribe_cluster")) return;
    auto& mine = per_job_[m.sender_job];
    if (mine >= max_per_job || subscribers_.size() >= max_total) {
      guard_.refused("resource_exhausted: subscribe_cluster from job " + m.sender_job.short_hex() + ": it has " +
                     std::to_string(mine) + " subscriptions (at most " + std::to_string(max_per_job) +
                     " a job, " + std::to_string(max_total) + " in all, " + std::to_string(subscribers_.size()) +
                     " now); refused");
      return;
    }
    ++mine;
  }
  job_of_.emplace(endpoint, m.sender_job);
  // Kept in the tables (bounded as above; past the budget, written at the next tick): a
  // restarted head still tells drivers and workers of node deaths.
  if (tables_ != nullptr && guard_.take_write()) {
    tables_->save_subscriber(m.subscriber);
  } else if (tables_ != nullptr) {
    unsaved_.push_back(m.subscriber);
  }
  subscribers_.push_back(std::move(m.subscriber));
}

void cluster_subscriptions::save_unsaved() {
  if (tables_ == nullptr) return;
  auto unsaved = std::move(unsaved_);
  unsaved_.clear();
  for (const auto& a : unsaved) {
    if (job_of_.contains(a.endpoint)) tables_->save_subscriber(a);  // not gone meanwhile
  }
}

void cluster_subscriptions::forget(const std::string& endpoint) {
  const auto at = [&](const address& a) { return a.endpoint == endpoint; };
  if (std::erase_if(subscribers_, at) > 0 && tables_ != nullptr) tables_->drop_subscriber(endpoint);
  if (auto j = job_of_.find(endpoint); j != job_of_.end()) {
    if (auto n = per_job_.find(j->second); n != per_job_.end() && --n->second == 0) per_job_.erase(n);
    job_of_.erase(j);
  }
}

void cluster_subscriptions::job_ended(const job_id& job) {
  // Its processes' subscriptions go with it (they stop; a job cannot leave its
  // subscriptions behind to fill the head).
  if (per_job_.erase(job) == 0) return;
  std::erase_if(subscribers_, [&](const address& a) {
    auto j = job_of_.find(a.endpoint);
    if (j == job_of_.end() || j->second != job) return false;
    if (tables_ != nullptr) tables_->drop_subscriber(a.endpoint);
    job_of_.erase(j);
    return true;
  });
}

} // namespace celer
