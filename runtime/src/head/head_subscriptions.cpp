// Processes subscribed to the cluster's news (node deaths): bounded per job, kept in the
// head's tables in batches. Part of class head (head.hpp); split from head.cpp by
// responsibility.
#include "head/head.hpp"

#include "log.hpp"

#include <celer/version.hpp>

#include <algorithm>

namespace celer {

void head::on(protocol::subscribe_cluster& m) {
  const auto& endpoint = m.subscriber.endpoint;
  if (subscriber_jobs_.contains(endpoint)) return;  // subscribed already (a resend)
  if (!m.sender_job.nil()) {
    if (!endpoint_ok(m.subscriber, m.sender_job, "subscribe_cluster")) return;
    auto& mine = subscriptions_of_[m.sender_job];
    if (mine >= max_cluster_subscriptions_per_job || cluster_subscribers_.size() >= max_cluster_subscriptions) {
      denials_.warn("resource_exhausted: subscribe_cluster from job " + m.sender_job.short_hex() + ": it has " +
                    std::to_string(mine) + " subscriptions (at most " +
                    std::to_string(max_cluster_subscriptions_per_job) + " a job, " +
                    std::to_string(max_cluster_subscriptions) + " in all, " +
                    std::to_string(cluster_subscribers_.size()) + " now); refused");
      return;
    }
    ++mine;
  }
  subscriber_jobs_.emplace(endpoint, m.sender_job);
  // Kept in the tables (bounded as above; written at the next tick): a restarted head
  // still tells drivers and workers of node deaths.
  if (tables_ && subscribers_saved_this_tick_ < subscriber_writes_per_tick) {
    ++subscribers_saved_this_tick_;
    tables_->save_subscriber(m.subscriber);
  } else if (tables_) {
    unsaved_subscribers_.push_back(m.subscriber);
  }
  cluster_subscribers_.push_back(std::move(m.subscriber));
}

void head::save_subscribers() {
  subscribers_saved_this_tick_ = 0;
  if (!tables_ || (unsaved_subscribers_.empty() && unsaved_actors_.empty())) return;
  auto unsaved = std::move(unsaved_subscribers_);
  unsaved_subscribers_.clear();
  auto actors = std::move(unsaved_actors_);
  unsaved_actors_.clear();
  tables_->begin_batch();
  for (const auto& a : unsaved) {
    if (subscriber_jobs_.contains(a.endpoint)) tables_->save_subscriber(a);  // not gone meanwhile
  }
  for (const auto& id : actors) {
    if (auto it = actors_.find(id); it != actors_.end()) persist(id, it->second);
  }
  tables_->commit_batch();
}

void head::forget_subscriber(const std::string& endpoint) {
  const auto at = [&](const address& a) { return a.endpoint == endpoint; };
  if (std::erase_if(cluster_subscribers_, at) > 0 && tables_) tables_->drop_subscriber(endpoint);
  if (auto j = subscriber_jobs_.find(endpoint); j != subscriber_jobs_.end()) {
    if (auto n = subscriptions_of_.find(j->second); n != subscriptions_of_.end() && --n->second == 0) {
      subscriptions_of_.erase(n);
    }
    subscriber_jobs_.erase(j);
  }
  for (auto& [id, a] : actors_) {
    if (std::erase_if(a.subscribers, at) > 0) persist(id, a);
  }
  net_.forget(endpoint);
}

} // namespace celer
