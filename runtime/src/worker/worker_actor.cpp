// The actor a worker hosts (worker.hpp): its creation (the factory, then the restore hook
// after a restart, its thread pools and concurrency groups, and actor_started to the head),
// and finding the instance a method runs on (inherited methods included).
#include "worker/worker.hpp"

#include "type_names.hpp"
#include "worker/call_pool.hpp"

#include <algorithm>

namespace celer {

void worker::create_actor(protocol::task_spec& spec) {
  actor_ = spec.actor;
  actor_resources_ = spec.resources;
  ctx_.actor = spec.actor;
  ctx_.priority = spec.priority;
  ctx_.env_vars = spec.env_vars;
  ctx_.restarts = spec.restarts;
  ctx_.resources = &actor_resources_;
  ctx_.task = spec.id;  // its factory and restore hook run as the creation task
  ctx_.function = &spec.function;
  ctx_.attempt = spec.attempt;
  ctx_.constructing = true;
  const auto* entry = detail::find_remote(spec.function);
  protocol::failure_info fail;
  bool ok = false;
  std::vector<detail::fetched> fetched;
  std::vector<detail::arg_bytes> args;
  if (entry == nullptr || entry->kind != detail::remote_kind::factory) {
    fail = failure(detail::failure_kind::actor_died, error_code::not_found, spec.function,
                   "actor factory '" + spec.function +
                     "' is not registered in this worker's binary (CELER_REMOTE)");
  } else if (resolve_args(spec, fetched, args, fail)) {
    try {
      instance_ = entry->make(*entry, args);
      factory_ = entry;
      bases_.clear();
      ok = instance_ != nullptr;
      if (!ok) {
        fail = failure(detail::failure_kind::actor_died, error_code::internal, spec.function,
                       "the actor factory returned null");
      } else if (spec.restarts > 0 && !spec.restore_method.empty()) {
        ok = restore(spec, fail);
      }
    } catch (const std::exception& e) {
      fail = failure(detail::failure_kind::actor_died, error_code::internal, spec.function,
                     "the actor's constructor (" + spec.function + ") threw " +
                       type_name(typeid(e)) + ": " + e.what());
      fail.exception_type = type_name(typeid(e));
    } catch (...) {
      fail = failure(detail::failure_kind::actor_died, error_code::internal, spec.function,
                     "the actor's constructor (" + spec.function + ") threw " +
                       current_exception_type() + " (not a std::exception)");
      fail.exception_type = current_exception_type();
    }
  } else {
    fail.kind = detail::failure_kind::actor_died;
    fail.message = "an argument of the actor's constructor failed: " + fail.message;
  }
  ctx_.task = {};
  ctx_.function = nullptr;
  ctx_.attempt = 0;
  ctx_.constructing = false;
  if (!ok) {
    instance_.reset();
    (void)net_.send(cfg_.head, protocol::actor_failed{actor_, fail});
    (void)net_.send(cfg_.node, protocol::actor_exited{actor_, cfg_.id});
    finished_ = true;
    return;
  }
  // With concurrency groups the calls in none run on a pool too (of max_concurrency
  // threads, one by default), so that a long one never holds up the groups' calls behind it.
  if (spec.max_concurrency > 1 || !spec.concurrency_groups.empty()) {
    pool_ = std::make_unique<call_pool>(std::max(1, spec.max_concurrency), ctx_);
    pooled_ = true;
  }
  // Its concurrency groups (the caller's core checked them; a spec from the wire is held
  // to the same bounds).
  for (const auto& [name, threads] : spec.concurrency_groups) {
    if (groups_.size() >= 64) break;
    groups_.emplace(name, std::make_unique<call_pool>(std::clamp(threads, 1, 1024), ctx_));
  }
  method_groups_ = spec.method_groups;
  // Its devices: a share of one (a request up to one GPU), else whole ones.
  std::vector<protocol::gpu_share> shares;
  const std::int64_t units = spec.resources.units(protocol::gpu);
  for (int index : cfg_.gpu_ids) {
    shares.push_back({index, std::min(units, protocol::resource_unit)});
  }
  started_ = protocol::actor_started{actor_, cfg_.self, std::move(shares)};
  (void)net_.send(cfg_.head, protocol::message(*started_));
}

bool worker::restore(const protocol::task_spec& spec, protocol::failure_info& fail) {
  const auto* hook = detail::find_remote(spec.restore_method);
  void* self = nullptr;
  if (hook == nullptr || hook->kind != detail::remote_kind::method || hook->arity != 0 ||
      (self = instance_for(*hook)) == nullptr) {
    fail = failure(detail::failure_kind::actor_died, error_code::not_found, spec.function,
                   "the restore hook '" + spec.restore_method +
                     "' is not a registered method of this actor taking no arguments");
    return false;
  }
  try {
    (void)hook->call(*hook, self, {});
    return true;
  } catch (const std::exception& e) {
    fail = failure(detail::failure_kind::actor_died, error_code::internal, spec.function,
                   "the actor's restore hook (" + spec.restore_method + ") threw " +
                     type_name(typeid(e)) + ": " + e.what());
    fail.exception_type = type_name(typeid(e));
  } catch (...) {
    fail = failure(detail::failure_kind::actor_died, error_code::internal, spec.function,
                   "the actor's restore hook (" + spec.restore_method + ") threw " +
                     current_exception_type() + " (not a std::exception)");
    fail.exception_type = current_exception_type();
  }
  return false;
}

void* worker::instance_for(const detail::remote_entry& method) {
  if (factory_ == nullptr || instance_ == nullptr || method.actor_type == nullptr) return nullptr;
  if (method.actor_type == factory_->actor_type || *method.actor_type == *factory_->actor_type) {
    return instance_.get();
  }
  // A method of a base class: the instance is an object of the factory's class, and the
  // base may sit at an offset in it (multiple inheritance) or be virtual. Found once.
  auto [it, added] = bases_.try_emplace(&method, nullptr);
  if (added && method.as_class != nullptr) it->second = method.as_class(*factory_, instance_.get());
  return it->second;
}

std::string worker::not_a_method(const std::string& name, const detail::remote_entry* entry) const {
  const std::string actor_class =
    factory_ != nullptr && factory_->actor_type != nullptr ? type_name(*factory_->actor_type) : "unknown";
  if (entry == nullptr) {
    return "method '" + name + "' is not registered in this worker's binary (CELER_REMOTE)";
  }
  if (entry->kind != detail::remote_kind::method || entry->actor_type == nullptr) {
    return "'" + name + "' is not a method (of this actor's class " + actor_class + ")";
  }
  return "method '" + name + "' is a method of " + type_name(*entry->actor_type) +
         ", which is not a public base of this actor's class " + actor_class;
}

} // namespace celer
