// The jobs API (jobs_api.hpp).
#include "http/jobs_api.hpp"

#include "http/api.hpp"
#include "jobs/entrypoint.hpp"

#include <algorithm>
#include <optional>

namespace celer::http {
namespace {

/// The most a log page holds (GET /api/jobs/<id>/logs), and a followed log's chunk: what the
/// head holds of a log at once is this and its JSON escaping (at most 6 bytes a byte).
constexpr std::uint64_t log_page_bytes = 1u << 20;

response error_response(const error& e) {
  int status = 500;
  switch (e.code()) {
    case error_code::invalid_argument:
    case error_code::failed_precondition: status = 400; break;
    case error_code::not_found: status = 404; break;
    case error_code::already_exists: status = 409; break;
    case error_code::permission_denied: status = 403; break;
    case error_code::resource_exhausted: status = 413; break;
    case error_code::unavailable: status = 503; break;
    default: break;
  }
  return json_response({{"error", e.message()}}, status);
}

jobs::asker asker_of(const request& r) { return {.admin = r.who.admin, .job = r.who.job}; }

/// The submit body, Ray's fields and celer's. Anything unknown is refused by name rather
/// than ignored: a Ray runtime_env feature celer lacks must not be silently dropped.
expected<jobs::submit_request> parse_submit(const std::string& body) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const std::exception& e) {
    return error(error_code::invalid_argument, std::string("the body is not JSON: ") + e.what());
  }
  if (!j.is_object()) return error(error_code::invalid_argument, "the body must be a JSON object");
  jobs::submit_request r;
  try {
    for (const auto& [key, value] : j.items()) {
      if (key == "entrypoint") {
        if (!value.is_string()) return error(error_code::invalid_argument, "entrypoint must be a string");
        auto argv = jobs::split_entrypoint(value.get<std::string>());
        if (!argv) return argv.error();
        if (!r.argv.empty()) return error(error_code::invalid_argument, "give entrypoint or entrypoint_argv, not both");
        r.argv = std::move(*argv);
      } else if (key == "entrypoint_argv") {
        if (!r.argv.empty()) return error(error_code::invalid_argument, "give entrypoint or entrypoint_argv, not both");
        r.argv = value.get<std::vector<std::string>>();
      } else if (key == "submission_id" || key == "job_id") {
        if (!value.is_null()) r.submission_id = value.get<std::string>();
      } else if (key == "metadata") {
        if (!value.is_null()) r.metadata = value.get<std::map<std::string, std::string>>();
      } else if (key == "entrypoint_num_cpus") {
        if (!value.is_null()) r.num_cpus = value.get<double>();
      } else if (key == "entrypoint_num_gpus") {
        if (!value.is_null()) r.num_gpus = value.get<double>();
      } else if (key == "priority") {
        if (!value.is_null()) r.priority = value.get<int>();
      } else if (key == "namespaces") {
        if (!value.is_null()) r.namespaces = value.get<std::vector<std::string>>();
      } else if (key == "runtime_env") {
        if (value.is_null()) continue;
        for (const auto& [k, v] : value.items()) {
          if (k == "env_vars") {
            r.env = v.get<std::map<std::string, std::string>>();
          } else if (k == "working_dir") {
            const auto wd = v.get<std::string>();
            constexpr std::string_view scheme = "celerpkg://";
            if (!wd.starts_with(scheme))
              return error(error_code::invalid_argument,
                           "runtime_env.working_dir must name an uploaded package (celerpkg://<digest>): the head never "
                           "reads a path or URL a client gives; `celer submit --working-dir DIR` packs and uploads one");
            r.package = wd.substr(scheme.size());
          } else {
            return error(error_code::invalid_argument, "runtime_env." + k +
                                                         " is not supported by celer (it knows env_vars and working_dir)");
          }
        }
      } else if (key == "entrypoint_resources" || key == "entrypoint_memory") {
        if (!value.is_null() && !(value.is_object() && value.empty()) && !(value.is_number() && value.get<double>() == 0))
          return error(error_code::invalid_argument, key + " is not supported by celer yet: use entrypoint_num_cpus/_gpus");
      } else {
        return error(error_code::invalid_argument, "unknown field '" + key + "' in the job submission");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return error(error_code::invalid_argument, std::string("a field of the submission has the wrong type: ") + e.what());
  }
  if (r.argv.empty()) return error(error_code::invalid_argument, "the submission has no entrypoint");
  return r;
}

} // namespace

nlohmann::json job_json(const jobs::job_record& r, const std::optional<protocol::task_counts>& tasks) {
  nlohmann::json runtime_env = nlohmann::json::object();
  if (!r.env.empty()) runtime_env["env_vars"] = r.env;
  if (!r.package.empty()) runtime_env["working_dir"] = "celerpkg://" + r.package;
  auto ms = [](std::int64_t v) { return v == 0 ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json j{{"type", "SUBMISSION"},
          {"job_id", r.id.hex()},
          {"submission_id", r.submission_id},
          {"status", jobs::job_state_name(r.status())},
          {"entrypoint", jobs::join_entrypoint(r.argv)},
          {"entrypoint_argv", r.argv},
          {"message", r.message},
          {"error_type", r.status() == jobs::job_state::failed ? nlohmann::json("JOB_ENTRYPOINT_COMMAND_ERROR") : nlohmann::json(nullptr)},
          {"start_time", ms(r.submitted_ms)},
          {"driver_start_time", ms(r.started_ms)},
          {"end_time", ms(r.ended_ms)},
          {"metadata", r.metadata},
          {"runtime_env", runtime_env},
          {"driver_exit_code", r.exit_code >= 0 ? nlohmann::json(r.exit_code) : nlohmann::json(nullptr)},
          {"driver_pid", r.pid > 0 ? nlohmann::json(r.pid) : nlohmann::json(nullptr)},
          {"entrypoint_num_cpus", r.num_cpus},
          {"entrypoint_num_gpus", r.num_gpus},
          {"priority", r.priority},
          {"namespaces", r.namespaces}};
  j["tasks"] = tasks ? task_counts_json(*tasks) : nlohmann::json(nullptr);
  return j;
}

std::vector<route> job_routes(jobs::job_manager& jobs, task_counts_source tasks) {
  auto* jm = &jobs;
  auto counts = [tasks](const job_id& id) { return tasks ? tasks(id) : std::nullopt; };
  std::vector<route> routes;
  const std::string id = "([A-Za-z0-9_.-]{1,64})";
  routes.push_back({"POST", "/api/jobs/?", [jm](const request& r) {
                      auto req = parse_submit(r.body);
                      if (!req) return error_response(req.error());
                      auto job = jm->submit(*req, asker_of(r));
                      if (!job) return error_response(job.error());
                      return json_response({{"job_id", job->submission_id},
                                            {"submission_id", job->submission_id},
                                            {"celer_job_id", job->id.hex()},
                                            {"status", jobs::job_state_name(job->status())},
                                            {"message", job->message}});
                    }});
  routes.push_back({"GET", "/api/jobs/?", [jm, counts](const request& r) {
                      auto list = nlohmann::json::array();
                      for (const auto& j : jm->list(asker_of(r))) list.push_back(job_json(j, counts(j.id)));
                      return json_response(list);
                    }});
  routes.push_back({"GET", "/api/jobs/" + id + "/?", [jm, counts](const request& r) {
                      auto job = jm->find(r.captures.at(0), asker_of(r));
                      if (!job) return error_response(job.error());
                      return json_response(job_json(*job, counts(job->id)));
                    }});
  routes.push_back({"GET", "/api/jobs/" + id + "/logs/?", [jm](const request& r) {
                      // One page: ?offset=BYTES (default 0) or ?tail=BYTES (the last ones),
                      // ?limit=BYTES (at most, and by default, log_page_bytes).
                      auto number = [&](const char* key, std::uint64_t fallback) -> std::optional<std::uint64_t> {
                        const auto it = r.query.find(key);
                        if (it == r.query.end()) return fallback;
                        const auto& v = it->second;
                        if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
                          return std::nullopt;
                        return std::stoull(v);
                      };
                      const auto offset = number("offset", 0);
                      const auto limit = number("limit", log_page_bytes);
                      const auto tail = number("tail", 0);
                      if (!offset || !limit || !tail)
                        return json_response({{"error", "offset, limit and tail are byte counts (digits)"}}, 400);
                      const auto want = std::clamp<std::uint64_t>(*limit, 1, log_page_bytes);
                      std::uint64_t from = *offset;
                      if (r.query.contains("tail")) {
                        auto size = jm->log_range(r.captures.at(0), asker_of(r), 0, 0);
                        if (!size) return error_response(size.error());
                        from = size->size - std::min(size->size, std::min(*tail, want));
                      }
                      auto page = jm->log_range(r.captures.at(0), asker_of(r), from, want);
                      if (!page) return error_response(page.error());
                      const auto next = page->offset + page->text.size();
                      // Moved into the JSON (an initializer list would copy the page).
                      nlohmann::json j = nlohmann::json::object();
                      j["logs"] = std::move(page->text);
                      j["offset"] = page->offset;
                      j["next_offset"] = next;
                      j["size"] = page->size;
                      j["more"] = next < page->size;
                      return json_response(j);
                    }});
  routes.push_back({"GET", "/api/jobs/" + id + "/logs/tail/?", [jm](const request& r) {
                      const std::string job = r.captures.at(0);
                      const auto who = asker_of(r);
                      auto first = jm->log_range(job, who, 0, 0);
                      if (!first) return error_response(first.error());
                      // From the start of the log, a page at a time, then what it gains, until
                      // the job has ended and everything it wrote has been sent.
                      struct cursor {
                        std::uint64_t sent = 0;
                        bool last = false;
                      };
                      auto at = std::make_shared<cursor>();
                      response out{.status = 200, .content_type = "text/plain; charset=utf-8"};
                      out.stream = [jm, job, who, at](std::string& chunk) {
                        if (at->last) return false;
                        auto rec = jm->find(job, who);
                        const bool ended = !rec || jobs::terminal(rec->status());
                        auto page = jm->log_range(job, who, at->sent, log_page_bytes);
                        if (page) {
                          at->sent += page->text.size();
                          chunk = std::move(page->text);
                          if (at->sent < page->size) return true;  // more already written: no wait
                        }
                        if (ended) {
                          at->last = true;
                          return !chunk.empty();
                        }
                        if (chunk.empty()) jm->wait_for_change(job, at->sent, std::chrono::milliseconds(500));
                        return true;
                      };
                      return out;
                    }});
  routes.push_back({"POST", "/api/jobs/" + id + "/stop/?", [jm](const request& r) {
                      auto stopped = jm->stop(r.captures.at(0), asker_of(r));
                      if (!stopped) return error_response(stopped.error());
                      return json_response({{"stopped", *stopped}});
                    }});
  routes.push_back({"DELETE", "/api/jobs/" + id + "/?", [jm](const request& r) {
                      auto done = jm->remove(r.captures.at(0), asker_of(r));
                      if (!done) return error_response(done.error());
                      return json_response({{"deleted", true}});
                    }});
  routes.push_back({"GET", "/api/packages/([0-9a-f]{32})", [jm](const request& r) {
                      if (!r.who.admin) return json_response({{"error", "only the cluster's token reads packages"}}, 403);
                      if (!jm->has_package(r.captures.at(0))) return json_response({{"error", "no such package"}}, 404);
                      return json_response({{"package", r.captures.at(0)}});
                    }});
  routes.push_back({"PUT", "/api/packages/([0-9a-f]{32})", [jm](const request& r) {
                      auto ok = jm->put_package(r.captures.at(0), r.body, asker_of(r));
                      if (!ok) return error_response(ok.error());
                      return json_response({{"package", r.captures.at(0)}, {"bytes", r.body.size()}});
                    }});
  return routes;
}

} // namespace celer::http
