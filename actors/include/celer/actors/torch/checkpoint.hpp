#pragma once
/// A LibTorch trainer's state as checkpoint entries (<celer/actors/checkpoint.hpp>): the
/// model's parameters and buffers one entry each (raw elements, so that an unchanged tensor
/// is an unchanged run of chunks the writers do not store again), the optimiser's state, and
/// LibTorch's CPU generator. Restoring them gives back every bit, so a resumed run computes
/// the same losses as one never stopped.
///
///   celer::checkpoint::snapshot s;
///   s.set_step(step);
///   celer::checkpoint::add_module(s, "model", *net);             // views: save() copies them
///   (void)celer::checkpoint::add_optimizer(s, "optimizer", *opt);
///   celer::checkpoint::add_torch_rng(s, "rng/torch");
///   s.add_rng("rng/order", order);                               // the batches' std engine
///   s.add_int("data/position", position);
///   (void)ck.save(s);                                            // returns; writers persist
///   ...
///   auto back = celer::checkpoint::restore(opts);
///   if (auto ok = celer::checkpoint::load_module(back->data, "model", *net); !ok) ...
///   (void)celer::checkpoint::load_optimizer(back->data, "optimizer", *opt);
///   (void)celer::checkpoint::load_torch_rng(back->data, "rng/torch");
///
/// Exactness needs the rest of the step to be deterministic too: the data order from a saved
/// std engine (not a std::*_distribution that keeps a cached value), and LibTorch's CPU
/// generator for dropout and random init, which is one per process: trials that are threads
/// of one process share it, so only a process that trains one model at a time resumes bit
/// for bit with dropout. On a GPU, LibTorch's kernels are not all deterministic; exactness is
/// promised on the CPU.

#include <celer/actors/checkpoint.hpp>
#include <celer/error.hpp>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <string>
#include <string_view>

namespace celer::checkpoint {

/// How tensor entries hold the bytes.
enum class tensor_bytes {
  /// A view of the tensor's memory, kept alive but not kept unchanged: save() must copy it
  /// before the next optimiser step (checkpointer::save and write do, before they return).
  view,
  /// A copy, for a snapshot that outlives the next step (one an actor returns, one queued).
  copy,
};

/// One entry per parameter and buffer, named `prefix` + "/" + LibTorch's dotted name
/// ("model/0.weight", "model/2.running_mean"), with attributes dtype ("float32") and shape
/// ("256,784"). CUDA tensors are copied to the CPU.
void add_module(snapshot& s, std::string_view prefix, const torch::nn::Module& module,
                tensor_bytes how = tensor_bytes::view);
/// Copies the entries add_module made back into `module`'s parameters and buffers, which
/// must have the same names, dtypes and shapes. not_found naming a tensor the snapshot lacks;
/// invalid_argument naming the first tensor whose dtype or shape differs, or an entry under
/// `prefix` the module has no tensor for (a checkpoint of another model). Changes nothing
/// unless every tensor matches.
[[nodiscard]] expected<void> load_module(const snapshot& s, std::string_view prefix,
                                         torch::nn::Module& module);

/// One tensor as an entry (the layout add_module uses), and back into `into` (same dtype and
/// shape) under no_grad.
void add_tensor(snapshot& s, std::string name, const at::Tensor& t,
                tensor_bytes how = tensor_bytes::view);
[[nodiscard]] expected<void> load_tensor(const snapshot& s, std::string_view name, at::Tensor& into);

/// The optimiser's state (per-parameter moments and steps, its param groups' options) as
/// one entry, in LibTorch's own archive format. internal when LibTorch cannot write it.
[[nodiscard]] expected<void> add_optimizer(snapshot& s, std::string name,
                                           const torch::optim::Optimizer& optimizer);
/// The state add_optimizer saved, into an optimiser of the same type over the same
/// parameters. not_found without the entry; data_loss when LibTorch cannot read it.
[[nodiscard]] expected<void> load_optimizer(const snapshot& s, std::string_view name,
                                            torch::optim::Optimizer& optimizer);

/// LibTorch's default CPU generator (dropout, randn, random init) as one entry, and back.
void add_torch_rng(snapshot& s, std::string name);
[[nodiscard]] expected<void> load_torch_rng(const snapshot& s, std::string_view name);

} // namespace celer::checkpoint
