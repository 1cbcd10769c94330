#include "core_shell.hpp"

#include "protocol/head_watch.hpp"
#include "log.hpp"

#include <chrono>
#include <memory>
#include <variant>

namespace celer {
namespace {

/// Hands a core the messages addressed to it (the core's own lock orders them). Its ticks
/// count out the lines celer::print's dedup folded. A driver's core also turns its ticks
/// into job heartbeats to the head, with its tasks' counts; with
/// a head watch, probes the head and fails every wait once it has been silent too long; and
/// fails every wait once the head says it ended the job (job_ended).
struct core_shell {
  core_worker* core;
  transport* net = nullptr;
  head_watch* watch = nullptr;
  /// The head ended this job (job_ended): no more heartbeats.
  bool ended = false;
  void handle(protocol::message& m) {
    if (std::holds_alternative<protocol::tick>(m)) {
      core->tick_logs();  // lines folded by celer::print's dedup are counted out when due
      if (net == nullptr || ended || (watch != nullptr && watch->gave_up())) return;
      (void)net->send(core->where().head,
                      protocol::job_heartbeat{core->where().job, core->task_counts(true), core->self()});
      if (watch != nullptr) on_tick();
    } else if (auto* e = std::get_if<protocol::job_ended>(&m)) {
      on_ended(*e);
    } else if (!std::holds_alternative<protocol::shutdown_component>(m)) {
      core->handle(m);
    }
  }
  /// The head stopped this job's actors and workers after its driver was silent too long
  /// (the driver, or its machine, stalled): what waits would wait for ever, so it fails.
  void on_ended(const protocol::job_ended& e) {
    if (ended || e.job != core->where().job) return;
    ended = true;
    CELER_LOG(error, "driver", e.reason + "; every wait and request fails with unavailable");
    core->stop(e.reason, error_code::unavailable);
  }
  void on_tick() {
    auto s = watch->tick(std::chrono::steady_clock::now());
    if (s.probe) {
      // A job's connection may ask only as its own job (lookup_actor's job field).
      auto probe = head_watch::probe(core->self());
      std::get<protocol::lookup_actor>(probe).job = core->where().job;
      (void)net->send(core->where().head, std::move(probe));
    }
    if (!s.say.empty()) CELER_LOG(warn, "driver", s.say);
    if (s.give_up) {
      CELER_LOG(error, "driver", s.why + "; every wait and request fails with unavailable");
      core->stop(s.why + ": the cluster is unreachable", error_code::unavailable);
    }
  }
};

} // namespace

void spawn_core_shell(component_host& host, core_worker& core, transport* heartbeats,
                      head_watch* watch) {
  host.spawn(core.self().id,
             as_component(std::make_shared<core_shell>(core_shell{&core, heartbeats, watch})),
             "core");
}

} // namespace celer
