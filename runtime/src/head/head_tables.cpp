#include "head/head_tables.hpp"

#include "log.hpp"

namespace celer {
namespace {

// Table names: short, fixed, and part of the on-disk format.
constexpr const char* nodes_table = "nodes";
constexpr const char* actors_table = "actors";
constexpr const char* jobs_table = "jobs";
constexpr const char* groups_table = "groups";
constexpr const char* durable_table = "durable";
constexpr const char* subscribers_table = "subscribers";

template <class T>
bool decode_row(std::string_view value, T& out, const char* table) {
  try {
    out = detail::unpack<T>(value, table);
    return true;
  } catch (const std::exception& e) {
    CELER_LOG(error, "head", std::string("skipped an unreadable row of table ") + table + ": " +
                               e.what());
    return false;
  }
}

} // namespace

head_tables::head_tables(std::shared_ptr<store::table_db> db) : db_(std::move(db)) {}

expected<head_state> head_tables::load() const {
  head_state s;
  auto each = [&](const char* table, auto&& take) -> expected<void> {
    return db_->scan(table, [&](std::string_view key, std::string_view value) {
      if (!take(key, value)) ++s.unreadable;
    });
  };
  auto ok = each(nodes_table, [&](std::string_view, std::string_view v) {
    node_row r;
    if (!decode_row(v, r, nodes_table)) return false;
    s.nodes.push_back(std::move(r));
    return true;
  });
  if (ok) {
    ok = each(actors_table, [&](std::string_view, std::string_view v) {
      actor_row r;
      if (!decode_row(v, r, actors_table)) return false;
      s.actors.push_back(std::move(r));
      return true;
    });
  }
  if (ok) {
    ok = each(jobs_table, [&](std::string_view k, std::string_view) {
      auto id = unique_id::from_bytes(k);
      if (!id) return false;
      s.jobs.push_back(job_id{*id});
      return true;
    });
  }
  if (ok) {
    ok = each(groups_table, [&](std::string_view, std::string_view v) {
      protocol::placement_group_info r;
      if (!decode_row(v, r, groups_table)) return false;
      s.groups.push_back(std::move(r));
      return true;
    });
  }
  if (ok) {
    ok = each(durable_table, [&](std::string_view k, std::string_view v) {
      auto obj = unique_id::from_bytes(k);
      auto node = unique_id::from_bytes(v);
      if (!obj || !node) return false;
      s.durable.push_back({object_id{*obj}, node_id{*node}});
      return true;
    });
  }
  if (ok) {
    ok = each(subscribers_table, [&](std::string_view, std::string_view v) {
      address r;
      if (!decode_row(v, r, subscribers_table)) return false;
      s.subscribers.push_back(std::move(r));
      return true;
    });
  }
  if (!ok) return ok.error();
  return s;
}

void head_tables::commit_batch() {
  if (!batch_) return;
  auto w = std::move(*batch_);
  batch_.reset();
  if (w.empty()) return;
  const std::string what = std::to_string(w.size()) + " row change(s) made together";
  write(std::move(w), what);
}

void head_tables::write(std::vector<store::table_write> w, const std::string& what) {
  if (batch_) {
    batch_->insert(batch_->end(), std::make_move_iterator(w.begin()), std::make_move_iterator(w.end()));
    return;
  }
  auto ok = db_->apply(w);
  if (ok) {
    if (failed_streak_ > 0) {
      CELER_LOG(warn, "head", "the head's tables take writes again (after " +
                                std::to_string(failed_streak_) + " failed)");
      failed_streak_ = 0;
    }
    return;
  }
  ++failed_;
  const std::string text = "could not persist " + what + ": " + ok.error().message() +
                           "; the head goes on from memory, but a restarted head would not "
                           "know this change";
  if (failed_streak_++ == 0) {
    CELER_LOG(error, "head", text);  // the first of a run of failures, always
  } else {
    errors_.warn(text);
  }
}

void head_tables::save_node(const node_row& n) {
  write({{nodes_table, n.registration.node.bytes(), detail::pack(n), false}},
        "node " + n.registration.node.short_hex());
}

void head_tables::save_actor(const actor_row& a) {
  write({{actors_table, a.spec.actor.bytes(), detail::pack(a), false}},
        "actor " + a.spec.actor.short_hex());
}

void head_tables::drop_actor(const actor_id& id) {
  write({{actors_table, id.bytes(), {}, true}}, "the removal of actor " + id.short_hex());
}

void head_tables::save_job(const job_id& id) {
  write({{jobs_table, id.bytes(), {}, false}}, "job " + id.short_hex());
}

void head_tables::save_subscriber(const address& a) {
  write({{subscribers_table, a.endpoint, detail::pack(a), false}}, "subscriber " + a.endpoint);
}

void head_tables::drop_subscriber(const std::string& endpoint) {
  write({{subscribers_table, endpoint, {}, true}}, "the end of subscriber " + endpoint);
}

void head_tables::drop_job(const job_id& id) {
  write({{jobs_table, id.bytes(), {}, true}}, "the end of job " + id.short_hex());
}

void head_tables::save_group(const protocol::placement_group_info& g) {
  write({{groups_table, g.id.bytes(), detail::pack(g), false}},
        "placement group " + g.id.short_hex());
}

void head_tables::drop_group(const placement_group_id& id) {
  write({{groups_table, id.bytes(), {}, true}}, "the removal of placement group " + id.short_hex());
}

void head_tables::save_durable(const node_id& node, const std::vector<object_id>& objects) {
  if (objects.empty()) return;
  std::vector<store::table_write> w;
  w.reserve(objects.size());
  for (const auto& o : objects) w.push_back({durable_table, o.bytes(), node.bytes(), false});
  write(std::move(w), std::to_string(objects.size()) + " durable object location(s) of node " +
                        node.short_hex());
}

} // namespace celer
