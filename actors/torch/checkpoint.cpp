// A LibTorch trainer's state as checkpoint entries (<celer/actors/torch/checkpoint.hpp>).
#include <celer/actors/torch/checkpoint.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace celer::checkpoint {
namespace {

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Bool: return "bool";
    default: return c10::toString(t);
  }
}

std::string shape_text(at::IntArrayRef sizes) {
  std::string out;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(sizes[i]);
  }
  return out;
}

std::string joined(std::string_view prefix, const std::string& name) {
  return prefix.empty() ? name : std::string(prefix) + "/" + name;
}

/// The bytes of a CPU, contiguous `t`, kept alive by the bytes themselves.
celer::bytes tensor_bytes_of(const at::Tensor& t, tensor_bytes how) {
  at::Tensor cpu = t.detach().to(at::kCPU).contiguous();
  if (cpu.nbytes() == 0) return {};
  // Still the tensor's own memory (it was a contiguous CPU tensor): a copy needs a clone.
  if (how == tensor_bytes::copy && cpu.data_ptr() == t.data_ptr()) cpu = cpu.clone();
  auto owner = std::make_shared<at::Tensor>(std::move(cpu));
  const void* data = owner->data_ptr();
  const std::size_t size = owner->nbytes();
  return celer::bytes(data, size, std::shared_ptr<const void>(owner, data));
}

expected<const entry*> bytes_entry(const snapshot& s, std::string_view name) {
  const entry* e = s.find(name);
  if (e == nullptr) return error(error_code::not_found, "the checkpoint has no entry " + std::string(name));
  if (e->type != value_type::bytes)
    return error(error_code::invalid_argument, "entry " + std::string(name) + " does not hold bytes");
  return e;
}

std::string attribute(const entry& e, const std::string& key) {
  const auto it = e.attributes.find(key);
  return it == e.attributes.end() ? std::string() : it->second;
}

/// Whether entry `e` holds a tensor shaped like `t`; the reason it does not.
expected<void> matches(const entry& e, const at::Tensor& t) {
  const auto dtype = attribute(e, "dtype");
  const auto shape = attribute(e, "shape");
  if (dtype != dtype_name(t.scalar_type()) || shape != shape_text(t.sizes())) {
    return error(error_code::invalid_argument, "entry " + e.name + " holds " + dtype + " [" + shape +
                                                 "], the model's tensor is " + dtype_name(t.scalar_type()) +
                                                 " [" + shape_text(t.sizes()) + "]");
  }
  if (e.data.size() != t.nbytes()) {
    return error(error_code::data_loss, "entry " + e.name + " holds " + std::to_string(e.data.size()) +
                                          " bytes where its shape needs " + std::to_string(t.nbytes()));
  }
  return {};
}

void copy_into(const entry& e, at::Tensor& into) {
  if (e.data.empty()) return;
  torch::NoGradGuard no_grad;
  // The entry's bytes need not be aligned for the dtype: copy them into a fresh tensor first.
  at::Tensor from = at::empty(into.sizes(), at::TensorOptions().dtype(into.scalar_type()));
  std::memcpy(from.data_ptr(), e.data.data(), e.data.size());
  into.copy_(from);
}

} // namespace

void add_tensor(snapshot& s, std::string name, const at::Tensor& t, tensor_bytes how) {
  s.add_bytes(std::move(name), tensor_bytes_of(t, how),
              {{"dtype", dtype_name(t.scalar_type())}, {"shape", shape_text(t.sizes())}});
}

expected<void> load_tensor(const snapshot& s, std::string_view name, at::Tensor& into) {
  auto e = bytes_entry(s, name);
  if (!e) return e.error();
  if (auto ok = matches(**e, into); !ok) return ok;
  copy_into(**e, into);
  return {};
}

void add_module(snapshot& s, std::string_view prefix, const torch::nn::Module& module, tensor_bytes how) {
  for (const auto& p : module.named_parameters(/*recurse=*/true)) add_tensor(s, joined(prefix, p.key()), p.value(), how);
  for (const auto& b : module.named_buffers(/*recurse=*/true)) add_tensor(s, joined(prefix, b.key()), b.value(), how);
}

expected<void> load_module(const snapshot& s, std::string_view prefix, torch::nn::Module& module) {
  std::vector<std::pair<const entry*, at::Tensor>> plan;
  std::vector<std::string> names;
  auto want = [&](const std::string& name, const at::Tensor& t) -> expected<void> {
    auto e = bytes_entry(s, joined(prefix, name));
    if (!e) return e.error();
    if (auto ok = matches(**e, t); !ok) return ok;
    plan.emplace_back(*e, t);
    names.push_back((*e)->name);
    return {};
  };
  for (const auto& p : module.named_parameters(true))
    if (auto ok = want(p.key(), p.value()); !ok) return ok;
  for (const auto& b : module.named_buffers(true))
    if (auto ok = want(b.key(), b.value()); !ok) return ok;
  // An entry under the prefix that the module lacks: a checkpoint of another model.
  const std::string under = prefix.empty() ? std::string() : std::string(prefix) + "/";
  for (const auto& e : s.entries()) {
    if (e.type != value_type::bytes || e.name.compare(0, under.size(), under) != 0) continue;
    if (attribute(e, "shape").empty() && attribute(e, "dtype").empty()) continue;  // not a tensor
    if (std::find(names.begin(), names.end(), e.name) == names.end()) {
      return error(error_code::invalid_argument,
                   "entry " + e.name + " names no tensor of the model (a checkpoint of another model?)");
    }
  }
  for (auto& [e, t] : plan) copy_into(*e, t);
  return {};
}

expected<void> add_optimizer(snapshot& s, std::string name, const torch::optim::Optimizer& optimizer) {
  std::vector<std::uint8_t> out;
  try {
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to([&](const void* data, std::size_t size) {
      const auto* p = static_cast<const std::uint8_t*>(data);
      out.insert(out.end(), p, p + size);
      return size;
    });
  } catch (const std::exception& e) {
    return error(error_code::internal, "LibTorch could not write the optimiser's state: " + std::string(e.what()));
  }
  s.add_bytes(std::move(name), celer::bytes(std::move(out)), {{"format", "torch.serialize"}});
  return {};
}

expected<void> load_optimizer(const snapshot& s, std::string_view name, torch::optim::Optimizer& optimizer) {
  auto e = bytes_entry(s, name);
  if (!e) return e.error();
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(reinterpret_cast<const char*>((*e)->data.data()), (*e)->data.size());
    optimizer.load(archive);
  } catch (const std::exception& ex) {
    return error(error_code::data_loss,
                 "entry " + std::string(name) + " is not this optimiser's state: " + std::string(ex.what()));
  }
  return {};
}

void add_torch_rng(snapshot& s, std::string name) {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  at::Tensor state;
  {
    std::lock_guard lock(g.mutex());
    state = g.get_state();
  }
  add_tensor(s, std::move(name), state, tensor_bytes::copy);
}

expected<void> load_torch_rng(const snapshot& s, std::string_view name) {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard lock(g.mutex());
  at::Tensor state = g.get_state();
  if (auto ok = load_tensor(s, name, state); !ok) return ok;
  try {
    g.set_state(state);
  } catch (const std::exception& ex) {
    return error(error_code::data_loss, "entry " + std::string(name) +
                                          " is not LibTorch's CPU generator state: " + std::string(ex.what()));
  }
  return {};
}

} // namespace celer::checkpoint
