// Which node's disk holds each durable object (object_directory.hpp).
#include "head/object_directory.hpp"

namespace celer {

object_directory::object_directory(transport& net, head_tables* tables, live_node where)
  : net_(net), tables_(tables), where_(std::move(where)) {}

void object_directory::restore(const std::vector<durable_row>& rows) {
  for (const auto& d : rows) holder_[d.object] = d.node;
}

void object_directory::on(protocol::durable_objects& m) {
  std::vector<object_id> changed;
  for (const auto& id : m.ids) {
    auto [it, fresh] = holder_.try_emplace(id, m.node);
    if (!fresh && it->second == m.node) continue;  // known: nothing to write
    it->second = m.node;
    changed.push_back(id);
  }
  if (tables_ != nullptr && !changed.empty()) tables_->save_durable(m.node, changed);
}

void object_directory::on(protocol::locate_object& m) {
  protocol::object_location r;
  r.request_id = m.request_id;
  if (auto d = holder_.find(m.id); d != holder_.end()) {
    if (auto addr = where_(d->second)) {
      r.found = true;
      r.node = d->second;
      r.node_addr = *addr;
    }
  }
  (void)net_.send(m.reply_to, std::move(r));
}

} // namespace celer
