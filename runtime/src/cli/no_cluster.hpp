#pragma once
// What the `celer` commands say when no cluster answers: a head whose session is still on
// this machine but whose process is gone (SIGKILL, a crash, a reboot), or an address where
// nothing listens. Said at once, with what to do, instead of after a request's timeout.
//
//   if (auto why = cli::dead_head_message(address)) { std::cerr << "celer status: " << *why; return 1; }
//   ...
//   catch (const celer::exception& e) { std::cerr << ... << cli::unreachable_hint(e.code()); }

#include "cluster/session.hpp"

#include <celer/error.hpp>

#include <optional>
#include <string>

namespace celer::cli {

/// When this machine holds the session of the head at `address` (the latest session, or the
/// one for that address) and its recorded head process is gone: what to say, ending with a
/// newline; nullopt otherwise (the head runs, or nothing is recorded: ask the address).
[[nodiscard]] inline std::optional<std::string> dead_head_message(const std::string& address) {
  if (address.empty()) return std::nullopt;
  auto session = cluster::find_session(address);
  if (!session || !*session) return std::nullopt;
  const auto pid = cluster::dead_head(**session);
  if (!pid) return std::nullopt;
  auto parts = cluster::parse_address(address);
  const std::string port = parts ? std::to_string(parts->port) : "PORT";
  return "no cluster runs at " + address + ": its head (pid " + std::to_string(*pid) +
         ") is gone, killed or crashed (its log: " + (**session / "logs" / "head.log").string() +
         ").\n  Start a new cluster:  celer start --head\n  or take that one back "
         "(its tables, nodes and drivers):  celer start --head --resume --port " + port + "\n";
}

/// What to do after a failure with `code` when it says nothing answers (unavailable); ""
/// for any other code.
[[nodiscard]] inline std::string unreachable_hint(error_code code) {
  if (code != error_code::unavailable) return {};
  return "  Is its head running? Start one with:  celer start --head\n  or name a running "
         "one with --address HOST:PORT or CELER_ADDRESS\n";
}

} // namespace celer::cli
