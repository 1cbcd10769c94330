#include "cluster/worker_process.hpp"

#include "cluster/process_wiring.hpp"
#include "cluster/session.hpp"
#include "crash.hpp"
#include "host.hpp"
#include "log.hpp"
#include "transport/zmq_transport.hpp"
#include "worker/worker.hpp"

#include <atomic>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include <unistd.h>

namespace celer::cluster {
namespace {

std::string require_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    throw exception(error_code::invalid_argument,
                    std::string("worker mode: ") + name + " is not set by the node agent");
  }
  return v;
}

unique_id require_id(const char* name) {
  auto id = unique_id::parse(require_env(name));
  if (!id) throw exception(error_code::invalid_argument, std::string("worker mode: bad ") + name);
  return *id;
}

} // namespace

bool worker_mode_requested() { return std::getenv("CELER_WORKER_ID") != nullptr; }

struct worker_process::impl {
  component_host host{2};
  std::unique_ptr<zmq_transport> net;
  std::unique_ptr<core_worker> core;
  node_id node;
  worker_id id;
  address self, node_addr, head_addr;
  std::promise<void> finished;
  std::atomic<bool> finished_set{false};
  bool stopped = false;
};

worker_process::worker_process(const knob_values& k) : impl_(std::make_unique<impl>()) {
  install_crash_handler();
  auto& s = *impl_;
  const worker_id id(require_id("CELER_WORKER_ID"));
  s.node = node_id(require_id("CELER_WORKER_NODE"));
  const address node_addr{s.node, require_env("CELER_WORKER_NODE_ENDPOINT")};
  const address head_addr{head_component, require_env("CELER_WORKER_HEAD_ENDPOINT")};
  const job_id job(require_id("CELER_WORKER_JOB"));
  std::vector<int> gpu_ids;
  if (const char* g = std::getenv("CELER_WORKER_GPUS")) {
    for (const char* p = g; *p != '\0';) {
      char* end = nullptr;
      gpu_ids.push_back(static_cast<int>(std::strtol(p, &end, 10)));
      if (end == p) break;
      p = *end == ',' ? end + 1 : end;
    }
  }
  // The job's credential, never the cluster's secret (process_launcher sets them).
  auto creds = credentials::for_job(job, require_env("CELER_JOB_CREDENTIAL"),
                                    require_env("CELER_CLUSTER_KEY"));
  if (!creds) throw exception(creds.error().code(), "worker mode: " + creds.error().message());
  for (const char* v : {"CELER_WORKER_ID", "CELER_WORKER_NODE", "CELER_WORKER_NODE_ENDPOINT",
                        "CELER_WORKER_HEAD_ENDPOINT", "CELER_WORKER_JOB", "CELER_WORKER_GPUS",
                        "CELER_JOB_CREDENTIAL", "CELER_CLUSTER_KEY"}) {
    ::unsetenv(v);  // not inherited by what user code starts
  }
  auto zo = transport_options(k, bind_for(k.node_ip.empty() ? "127.0.0.1" : k.node_ip), std::move(*creds));
  // Tasks run on the receiver thread (below); a standby receives while one runs long.
  zo.standby_receiver = true;
  // A key not its job's is asked about at the head: a job it may meet (a detached actor's
  // callers, or the detached actor it calls) is let in.
  zo.key_authority = head_addr.endpoint;
  s.net = std::make_unique<zmq_transport>(s.host.local(), std::move(zo));

  auto where = core_endpoints(*s.net, head_addr, job);
  where.node = node_addr;
  where.this_node = s.node;
  s.core = start_core(s.host, *s.net, where);
  const address self{id, s.net->endpoint()};
  worker::config wc{id, self, node_addr, head_addr, s.node, std::move(gpu_ids),
                    [net = s.net.get()] { net->receiver_waits(); }};
  auto hosted = std::make_shared<worker>(*s.net, *s.core, wc);
  // A preemption notice is handled as it arrives, beside the actor's running call; the
  // rest goes to the worker's inbox, in order. When the worker was idle, the thread that
  // received the message runs it (the transport's receiver thread: no hand-off to another
  // thread, and always the same thread for user code); when it finishes for good, its
  // component (the CAF actor) hears it and stops.
  auto drain = [w = hosted.get(), local = &s.host.local(), id] {
    protocol::message wake = protocol::worker_wake{};
    try {
      w->handle(wake);
    } catch (const std::exception& e) {
      CELER_LOG(error, "worker", std::string("handling its inbox: ") + e.what());
    }
    if (w->finished()) (void)local->send(address{id, {}}, protocol::worker_wake{});
  };
  s.net->handle_directly(id, [w = hosted.get(), net = s.net.get(), drain](protocol::message& m) {
    if (auto* notice = std::get_if<protocol::preempt_actor>(&m)) {
      w->preempted(*notice);
      return;
    }
    if (w->front_door(m)) return;
    net->run_on_receiver(drain);
  });
  // A parked coroutine call's value came (on the core's thread): its resumption runs on the
  // receiver thread too, after what runs there now.
  hosted->on_wake([w = hosted.get(), net = s.net.get(), drain] {
    protocol::message m = protocol::worker_wake{};
    if (!w->front_door(m)) net->post_to_receiver(drain);
  });
  s.host.spawn_detached(id, as_component(std::move(hosted)), "worker",
                        [&s] {
                          if (!s.finished_set.exchange(true)) s.finished.set_value();
                        });
  s.id = id;
  s.self = self;
  s.node_addr = node_addr;
  s.head_addr = head_addr;
}

void worker_process::start() {
  auto& s = *impl_;
  s.net->start();
  (void)s.net->send(s.head_addr, protocol::subscribe_cluster{s.core->self()});
  (void)s.net->send(s.node_addr, protocol::worker_ready{s.id, s.self});
}

worker_process::~worker_process() { stop(); }
core_worker& worker_process::core() noexcept { return *impl_->core; }
const node_id& worker_process::node() const noexcept { return impl_->node; }

void worker_process::wait_until_finished() { impl_->finished.get_future().wait(); }

void worker_process::stop() {
  auto& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  s.core->stop("the worker is stopping");
  (void)s.host.local().send(s.core->self(), protocol::shutdown_component{"stop"});
  s.host.stop();
  s.net->stop();
}

} // namespace celer::cluster
