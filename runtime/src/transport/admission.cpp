#include "transport/admission.hpp"

namespace celer {
namespace {

error denied(const peer_identity& who, const char* name, const std::string& why) {
  return error(error_code::permission_denied,
               std::string(name) + " from " + who.describe() + " refused: " + why);
}

error denied(const peer_identity& who, const protocol::message& m, const std::string& why) {
  return denied(who, protocol::name_of(m), why);
}

/// A job's message to a process of another job (one it may meet).
bool foreign(const peer_identity& who, const peer_identity* self) {
  return who.role == peer_role::job && self != nullptr && self->role == peer_role::job && who.job != self->job;
}

} // namespace

expected<void> admit_type(const peer_identity& who, std::uint32_t type, const peer_identity* self) {
  if (type >= std::variant_size_v<protocol::message>) return {};
  const auto rule = protocol::senders_of(type);
  if (rule == protocol::senders::local) {
    return denied(who, protocol::name_of_type(type), "it is never accepted from the wire");
  }
  if (who.role == peer_role::job && rule == protocol::senders::cluster) {
    return denied(who, protocol::name_of_type(type), "only the head and nodes send it");
  }
  if (foreign(who, self) && rule != protocol::senders::shared) {
    return denied(who, protocol::name_of_type(type),
                  "only a detached actor's calls, answers and cancels cross jobs (this process is job " +
                    self->job.short_hex() + "'s)");
  }
  return {};
}

expected<void> admit(const peer_identity& who, protocol::message& m, const peer_identity* self) {
  if (auto ok = admit_type(who, static_cast<std::uint32_t>(m.index()), self); !ok) return ok;
  if (who.role == peer_role::cluster) return {};
  if (foreign(who, self)) {
    if (auto* run = std::get_if<protocol::execute_task>(&m); run && run->spec.kind != protocol::task_kind::actor_call) {
      return denied(who, m, "from another job only an actor call is taken, not a task or an actor's creation");
    }
  }
  return std::visit(
    [&](auto& msg) -> expected<void> {
      if constexpr (requires { msg.job; }) {
        if (msg.job != who.job) {
          return denied(who, m, "it names job " + msg.job.short_hex());
        }
      }
      if constexpr (requires { msg.spec.job; }) {
        // An actor call carries no job of its own: it acts for the caller's.
        if (msg.spec.job.nil()) msg.spec.job = who.job;
        if (msg.spec.job != who.job) {
          return denied(who, m, "its task belongs to job " + msg.spec.job.short_hex());
        }
      }
      if constexpr (requires { msg.sender_job; }) msg.sender_job = who.job;
      return {};
    },
    m);
}

} // namespace celer
