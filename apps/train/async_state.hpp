#pragma once
// An asynchronous checkpoint of celer-train (apps/train/README.md, "Modes"): the parameter
// servers' whole state (weights, optimiser moments and step count) at the slowest worker's
// clock, as checkpoint entries, and back. Internal to apps/train (driver.cpp); no LibTorch.
//
//   auto st = servers->state();                              // expected<shard_state>
//   auto s = servers_checkpoint(*st, switched_at);           // views of *st: save before it goes
//   ...
//   auto back = servers_state(restored.data);                // data_loss when an entry is missing
#include <celer/actors/checkpoint.hpp>
#include <celer/actors/parameter_server.hpp>
#include <celer/error.hpp>

#include <cstdint>

namespace celer::train_app {

/// The entries: `mode` "async", `step` (the clock), `switched_at` (hybrid's switch, -1
/// when none), `ps/optimizer_steps`, and `ps/weights`, `ps/first`, `ps/second` as float32
/// views of `state` (it must outlive the save). The snapshot's step is the clock.
[[nodiscard]] checkpoint::snapshot servers_checkpoint(const parameter_server::shard_state& state, std::int64_t switched_at);

/// Whether `s` is an asynchronous checkpoint (its `mode` entry says "async").
[[nodiscard]] bool is_servers_checkpoint(const checkpoint::snapshot& s);

/// The servers' state in an asynchronous checkpoint; data_loss naming the entry that is
/// missing or not whole floats.
[[nodiscard]] expected<parameter_server::shard_state> servers_state(const checkpoint::snapshot& s);

} // namespace celer::train_app
