#include "transport/admission.hpp"

namespace celer {
namespace {

error denied(const peer_identity& who, const protocol::message& m, const std::string& why) {
  return error(error_code::permission_denied, std::string(protocol::name_of(m)) + " from " +
                                                who.describe() + " refused: " + why);
}

} // namespace

expected<void> admit(const peer_identity& who, protocol::message& m) {
  const auto rule = protocol::senders_of(m.index());
  if (rule == protocol::senders::local) {
    return denied(who, m, "it is never accepted from the wire");
  }
  if (who.role == peer_role::cluster) return {};
  if (rule == protocol::senders::cluster) {
    return denied(who, m, "only the head and nodes send it");
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
