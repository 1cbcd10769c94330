// An asynchronous checkpoint of celer-train (async_state.hpp).
#include "async_state.hpp"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace celer::train_app {

checkpoint::snapshot servers_checkpoint(const parameter_server::shard_state& state, std::int64_t switched_at) {
  checkpoint::snapshot s;
  s.add_text("mode", "async");
  s.add_int("step", state.clock);
  s.add_int("switched_at", switched_at);
  s.add_int("ps/optimizer_steps", state.optimizer_steps);
  auto floats = [&](const char* name, const std::vector<float>& v) {
    s.add_view(name, v.data(), v.size() * sizeof(float), {{"dtype", "float32"}});
  };
  floats("ps/weights", state.weights);
  floats("ps/first", state.first);
  floats("ps/second", state.second);
  s.set_step(state.clock);
  return s;
}

bool is_servers_checkpoint(const checkpoint::snapshot& s) {
  auto mode = s.get_text("mode");
  return mode && *mode == "async";
}

expected<parameter_server::shard_state> servers_state(const checkpoint::snapshot& s) {
  parameter_server::shard_state st;
  auto step = s.get_int("step");
  auto opt_steps = s.get_int("ps/optimizer_steps");
  if (!step || !opt_steps) return error(error_code::data_loss, "an asynchronous checkpoint without its step");
  st.clock = *step;
  st.optimizer_steps = *opt_steps;
  for (auto [name, into] : {std::pair{"ps/weights", &st.weights}, {"ps/first", &st.first}, {"ps/second", &st.second}}) {
    const auto* e = s.find(name);
    if (e == nullptr || e->data.size() % sizeof(float) != 0)
      return error(error_code::data_loss, std::string("an asynchronous checkpoint whose ") + name + " is missing or torn");
    into->resize(e->data.size() / sizeof(float));
    if (!into->empty()) std::memcpy(into->data(), e->data.data(), into->size() * sizeof(float));
  }
  if (st.weights.empty()) return error(error_code::data_loss, "an asynchronous checkpoint without weights");
  return st;
}

} // namespace celer::train_app
