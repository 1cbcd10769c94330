#include "recovery_log.hpp"

namespace celer::train_app {

recovery_log::peer_recovery recovery_log::by_peers(int failure, const std::vector<int>& replaced, std::int64_t step,
                                                   clock::time_point now) {
  const peer_recovery took{.seconds = since_failure_seen(now),
                           .seen_after_call_began = std::chrono::duration<double>(failure_seen_ - call_began_).count()};
  entries_.push_back({{"failure", failure}, {"how", "peers"}, {"replaced", replaced}, {"step", step},
                      {"seconds", took.seconds}, {"seen_after_call_began_s", took.seen_after_call_began}});
  return took;
}

void recovery_log::by_checkpoint(int failure, std::int64_t step, clock::time_point now) {
  entries_.push_back({{"failure", failure}, {"how", "checkpoint"}, {"step", step}, {"seconds", since_failure_seen(now)}});
}

void recovery_log::by_servers(int failure, int rank, std::int64_t step, double seconds) {
  entries_.push_back({{"failure", failure}, {"how", "servers"}, {"replaced", {rank}}, {"step", step}, {"seconds", seconds}});
}

void recovery_log::summarise(nlohmann::ordered_json& summary) const {
  if (!entries_.empty()) summary["recoveries"] = entries_;
}

} // namespace celer::train_app
