#include "cluster/process_wiring.hpp"

#include "cluster/head_watch.hpp"
#include "log.hpp"

#include <algorithm>
#include <chrono>
#include <utility>
#include <variant>

namespace celer::cluster {

std::string bind_for(const std::string& ip) { return "tcp://" + ip + ":*"; }

std::size_t max_frame_bytes(const knob_values& k) {
  return std::max<std::size_t>(16u << 20, static_cast<std::size_t>(k.inline_object_bytes) + (1u << 20));
}

zmq_transport::options transport_options(const knob_values& k, std::string bind,
                                         credentials creds) {
  zmq_transport::options zo;
  zo.bind = std::move(bind);
  zo.creds = std::move(creds);
  zo.encrypt = k.encryption != 0;
  zo.max_body_bytes = static_cast<std::size_t>(k.max_message_bytes);
  zo.max_frame_bytes = max_frame_bytes(k);
  return zo;
}

void core_shell::handle(protocol::message& m) {
  if (std::holds_alternative<protocol::tick>(m)) {
    if (net == nullptr || (watch != nullptr && watch->gave_up())) return;
    (void)net->send(core->where().head, protocol::job_heartbeat{core->where().job});
    if (watch != nullptr) on_tick();
  } else if (!std::holds_alternative<protocol::shutdown_component>(m)) {
    core->handle(m);
  }
}

void core_shell::on_tick() {
  auto s = watch->tick(std::chrono::steady_clock::now());
  if (s.probe) (void)net->send(core->where().head, head_watch::probe(core->self()));
  if (!s.say.empty()) CELER_LOG(warn, "driver", s.say);
  if (s.give_up) {
    CELER_LOG(error, "driver", s.why + "; every wait and request fails with unavailable");
    core->stop(s.why + ": the cluster is unreachable", error_code::unavailable);
  }
}

} // namespace celer::cluster
