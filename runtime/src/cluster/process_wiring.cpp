#include "cluster/process_wiring.hpp"

#include "protocol/head_watch.hpp"
#include "cluster/session.hpp"
#include "core_shell.hpp"
#include "protocol/env_vars.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <chrono>
#include <utility>

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
  zo.max_peers = static_cast<std::size_t>(std::clamp(k.max_connections, 1, 1000));
  return zo;
}

core_worker::endpoints core_endpoints(const zmq_transport& net, const address& head,
                                      const job_id& job) {
  core_worker::endpoints where;
  where.self = address{unique_id::random(), net.endpoint()};
  where.head = head;
  where.job = job;
  where.binary = self_executable();
  if (const char* package = std::getenv("CELER_JOB_PACKAGE"); package != nullptr && *package != '\0') {
    where.package = package;
    if (const char* wd = std::getenv("CELER_JOB_WORKING_DIR")) where.binary = package_binary(where.binary, wd);
  }
  // A submitted job's driver: the variables `celer submit --env` gave it are its workers'
  // too (the job manager names them), as Ray's job runtime_env env_vars are.
  if (const char* names = std::getenv("CELER_ENV_VARS"); names != nullptr) {
    std::string_view rest(names);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string name(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      const char* value = std::getenv(name.c_str());
      if (value != nullptr && protocol::env_name_valid(name) && !protocol::env_name_reserved(name)) {
        where.env_vars[name] = value;
      }
    }
  }
  where.cluster = true;
  return where;
}

std::string package_binary(const std::string& binary, const std::string& working_dir) {
  std::error_code ec;
  const auto root = std::filesystem::weakly_canonical(working_dir, ec);
  if (ec || root.empty()) return binary;
  const auto program = std::filesystem::weakly_canonical(binary, ec);
  if (ec) return binary;
  const auto inside = program.lexically_relative(root);
  if (inside.empty() || inside.is_absolute() || *inside.begin() == "..") return binary;
  return inside.string();
}

std::unique_ptr<core_worker> start_core(component_host& host, zmq_transport& net,
                                        const core_worker::endpoints& where,
                                        transport* heartbeats, head_watch* watch) {
  auto core = std::make_unique<core_worker>(net, where);
  spawn_core_shell(host, *core, heartbeats, watch);
  // The head's answers to the watch's probes stop here; its job_ended goes to the core's
  // shell (which stops the core and its heartbeats); the rest is the core's.
  net.handle_directly(where.self.id, [core = core.get(), watch, local = &host.local(),
                                      self = where.self](protocol::message& m) {
    if (watch != nullptr && head_watch::answers_probe(m)) {
      watch->heard(std::chrono::steady_clock::now());
    } else if (std::holds_alternative<protocol::job_ended>(m)) {
      (void)local->send(self, std::move(m));
    } else {
      core->handle(m);
    }
  });
  return core;
}

} // namespace celer::cluster
