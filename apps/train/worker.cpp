// The trainer-worker actor (worker.hpp): its methods. Its state and a training step are in
// worker_impl.hpp and worker_step.cpp.
#include "worker_impl.hpp"

#include <mutex>

namespace celer::train_app {
namespace {

/// torch::manual_seed and the initial weights use LibTorch's one global generator; workers
/// that are threads of one process (embedded) build their models one at a time.
std::mutex& model_building() {
  static std::mutex m;
  return m;
}

} // namespace

trainer_worker::trainer_worker(const worker_spec& spec) : impl_(std::make_unique<impl>()) {
  auto& w = *impl_;
  w.spec = spec;
  torch::set_num_threads(std::max(1, spec.threads));
  w.data = training_data::load(spec);
  {
    std::lock_guard lock(model_building());
    w.net.emplace(spec, w.data);
  }
  w.params = w.net->parameters();
  auto opt = actors::make_optimizer(w.params, {.name = spec.config.optimizer, .lr = spec.config.lr,
                                               .weight_decay = spec.config.weight_decay, .momentum = spec.config.momentum});
  if (!opt) fail("the config does not make an optimiser: " + opt.error().message());
  w.optimizer = std::move(*opt);
  std::size_t total = 0;
  for (const auto& p : w.params) {
    if (p.scalar_type() != torch::kFloat) fail("only float32 parameters are trained here");
    total += static_cast<std::size_t>(p.numel());
  }
  w.flat.resize(total);
  if (spec.config.compression == "sign") {
    auto c = trainer::sign_compressor::make(total);
    if (!c) fail("sign compression: " + c.error().message());
    w.sign.emplace(std::move(*c));
  } else if (spec.config.compression == "topk") {
    const auto k = std::clamp<std::size_t>(static_cast<std::size_t>(std::llround(spec.config.topk_fraction * static_cast<double>(total))), 1, total);
    auto c = trainer::topk_compressor::make(total, {.k = k});
    if (!c) fail("top-k compression: " + c.error().message());
    w.topk.emplace(std::move(*c));
  } else if (spec.config.compression != "none") {
    fail("unknown compression '" + spec.config.compression + "': none, sign or topk");
  }
  if (spec.config.batch_size_policy == "noise_scale") w.adaptive.emplace(adaptive_batch::make(spec));
  if (spec.config.loss_scale == "dynamic") {
    auto s = trainer::loss_scaler::make({.initial = spec.config.loss_scale_init, .growth_interval = spec.config.loss_scale_growth_interval});
    if (!s) fail("loss scaling: " + s.error().message());
    w.scaler.emplace(std::move(*s));
  } else if (spec.config.loss_scale != "none") {
    fail("unknown loss_scale '" + spec.config.loss_scale + "': none or dynamic");
  }
  w.open_loader();
  if (spec.config.straggler_timeout_ms > 0) {
    // The step thread's copy of the classifier (the config refuses the straggler option
    // with the transformer, bf16 or the noise_scale policy: it runs the plain fp32 step).
    torch::nn::Sequential copy{nullptr};
    {
      std::lock_guard lock(model_building());
      auto made = actors::make_model({.kind = spec.config.model, .width = spec.config.width, .depth = spec.config.depth,
                                      .dropout = spec.config.dropout, .seed = spec.config.seed},
                                     w.data.train.sample_shape, w.data.train.classes);
      if (!made) fail("the config does not make a model: " + made.error().message());
      copy = std::move(*made);
    }
    w.stepper = std::make_unique<step_thread>(std::move(copy), &w.loader,
                                              std::vector<std::int64_t>(w.data.train.sample_shape.begin(), w.data.train.sample_shape.end()),
                                              spec.config.accumulate_steps, std::max(1, spec.threads));
    w.contribution.resize(total + 1);
  }
}

trainer_worker::~trainer_worker() = default;

start_info trainer_worker::start() {
  auto& w = *impl_;
  if (!w.group) {
    auto g = collective::group::join(w.group_options());
    if (!g) fail("worker " + std::to_string(w.spec.rank) + " cannot join group '" + w.spec.group + "': " + g.error().message());
    std::lock_guard lock(w.group_mutex);
    w.group.emplace(std::move(*g));
  }
  // Every replica starts from rank 0's weights, whatever each built.
  w.gather(/*grads=*/false);
  if (auto ok = w.joined().broadcast(std::span(w.flat), /*root=*/0); !ok)
    fail("broadcasting the initial weights: " + ok.error().message());
  w.scatter(/*grads=*/false);
  w.started = true;
  return {.train_samples = w.data.train_samples(),
          .valid_samples = w.data.valid_samples(),
          .parameters = static_cast<std::int64_t>(w.flat.size()),
          .batches_per_epoch = static_cast<std::int64_t>(w.loader->batches_per_epoch())};
}

double trainer_worker::measure_speed() {
  return torch_edge("measuring the worker's speed", [&] {
    auto& w = *impl_;
    torch::set_num_threads(std::max(1, w.spec.threads));
    w.net->train_mode();
    // Two passes to warm up, then at least 16 and 0.3 s of them (at most 256). The median
    // pass: a pass that lost its core to another process for a while does not count.
    constexpr int warm = 2, timed = 16, most = 256;
    std::vector<double> per_sample;
    double seconds = 0;
    for (int i = 0; i < warm + most && (i < warm + timed || seconds < 0.3); ++i) {
      auto b = w.loader->next();
      if (!b) fail("the data loader ended");
      w.optimizer->zero_grad();
      const auto t = clock_type::now();
      const auto m = w.pass(*b, 1.0);
      const double took = seconds_since(t);
      if (i >= warm && m.samples > 0) {
        seconds += took;
        per_sample.push_back(took / static_cast<double>(m.samples));
      }
    }
    w.optimizer->zero_grad();
    w.open_loader();  // the run draws its batches from the start
    if (per_sample.empty()) return 0.0;
    std::nth_element(per_sample.begin(), per_sample.begin() + static_cast<std::ptrdiff_t>(per_sample.size() / 2), per_sample.end());
    const double median = per_sample[per_sample.size() / 2];
    return median > 0 ? 1.0 / median : 0.0;
  });
}

std::int64_t trainer_worker::set_batch_split(std::vector<std::int64_t> split, std::int64_t step) {
  auto& w = *impl_;
  if (static_cast<int>(split.size()) != w.spec.world)
    fail("a batch split of " + std::to_string(split.size()) + " for " + std::to_string(w.spec.world) + " workers");
  for (auto b : split)
    if (b < 1) fail("a batch split holds " + std::to_string(b) + ": every worker needs at least 1 sample a micro-batch");
  w.spec.batch_split = std::move(split);
  if (w.stepper) w.stepper->drain();
  w.open_loader();
  for (std::int64_t i = 0; i < step * w.spec.config.accumulate_steps; ++i) (void)w.loader->next();
  return static_cast<std::int64_t>(w.loader->batches_per_epoch());
}

std::vector<step_figures> trainer_worker::run_steps(std::int64_t steps) {
  return torch_edge("a training step", [&] { return impl_->run_steps(steps); });
}


std::int64_t trainer_worker::enter_async(parameter_server::sharded servers) {
  return torch_edge("switching to the parameter servers", [&] {
    auto& w = *impl_;
    w.servers.emplace(std::move(servers));
    if (w.spec.rank == 0) {
      if (auto ok = w.servers->init(w.export_state()); !ok)
        fail("worker 0 cannot hand its weights to the parameter servers: " + ok.error().message());
    }
    // The others wait inside the servers for rank 0's init.
    auto got = w.servers->pull(w.spec.rank, w.step + 1, w.flat);
    if (!got) fail("worker " + std::to_string(w.spec.rank) + " cannot pull the weights: " + got.error().message());
    w.scatter(/*grads=*/false);
    return got->version;
  });
}

std::vector<step_figures> trainer_worker::last_call_figures() { return impl_->call_figures; }

std::int64_t trainer_worker::join_async(parameter_server::sharded servers, std::int64_t step) {
  return torch_edge("joining the parameter servers", [&] {
    auto& w = *impl_;
    w.servers.emplace(std::move(servers));
    w.step = w.applied = step;
    // The loader has no seek: a fresh one, the batches of the steps taken drawn and dropped.
    w.open_loader();
    for (std::int64_t i = 0; i < step * w.spec.config.accumulate_steps; ++i) (void)w.loader->next();
    auto got = w.servers->pull(w.spec.rank, step + 1, w.flat);
    if (!got) fail("worker " + std::to_string(w.spec.rank) + " cannot pull the weights: " + got.error().message());
    w.scatter(/*grads=*/false);
    return step;
  });
}

std::int64_t trainer_worker::finish_async() {
  return torch_edge("pulling the final weights", [&] {
    auto& w = *impl_;
    if (!w.servers) fail("worker " + std::to_string(w.spec.rank) + ": finish_async before enter_async");
    auto got = w.servers->pull(w.spec.rank, w.step + 1, w.flat);
    if (!got) fail("worker " + std::to_string(w.spec.rank) + " cannot pull the final weights: " + got.error().message());
    w.scatter(/*grads=*/false);
    return w.step;
  });
}

validation trainer_worker::evaluate() {
  auto& w = *impl_;
  torch::set_num_threads(std::max(1, w.spec.threads));
  return torch_edge("the validation", [&] { return w.net->evaluate(w.data); });
}

std::string trainer_worker::parameters_digest() {
  auto& w = *impl_;
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& p : w.params) {
    const auto t = p.detach().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    const auto n = static_cast<std::size_t>(t.numel()) * t.element_size();
    for (std::size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

checkpoint::snapshot trainer_worker::save_state() {
  auto& w = *impl_;
  checkpoint::snapshot s;
  // Copies: the snapshot is this call's result, packed after the call returns.
  checkpoint::add_module(s, "model", w.net->module(), checkpoint::tensor_bytes::copy);
  if (auto ok = checkpoint::add_optimizer(s, "optimizer", *w.optimizer); !ok) fail(ok.error().message());
  s.add_int("step", w.step);
  if (!w.spec.batch_split.empty()) {
    std::string split;
    for (auto b : w.spec.batch_split) split += (split.empty() ? "" : ",") + std::to_string(b);
    s.add_text("batch_split", split);  // the driver reads it back on --resume
  }
  if (w.scaler) {
    const auto& st = w.scaler->state();
    s.add_float("loss_scale/scale", st.scale);
    s.add_int("loss_scale/clean_steps", st.clean_steps);
    s.add_int("loss_scale/overflows", st.overflows);
    s.add_int("loss_scale/growths", st.growths);
  }
  s.set_step(w.step);
  return s;
}

std::int64_t trainer_worker::load_state(checkpoint::snapshot state) {
  auto& w = *impl_;
  auto check = [](expected<void> ok) {
    if (!ok) fail("the checkpoint does not fit this run's model: " + ok.error().message());
  };
  check(checkpoint::load_module(state, "model", w.net->module()));
  check(checkpoint::load_optimizer(state, "optimizer", *w.optimizer));
  auto step = state.get_int("step");
  if (!step) fail("the checkpoint has no step: " + step.error().message());
  w.step = w.applied = *step;
  if (w.scaler && state.find("loss_scale/scale") != nullptr) {
    auto scale = state.get_float("loss_scale/scale");
    auto clean = state.get_int("loss_scale/clean_steps");
    auto overflows = state.get_int("loss_scale/overflows");
    auto growths = state.get_int("loss_scale/growths");
    if (!scale || !clean || !overflows || !growths) fail("the checkpoint's loss scale is incomplete");
    check(w.scaler->restore({.scale = *scale, .clean_steps = *clean, .overflows = *overflows, .growths = *growths}));
  }
  // This worker's error-feedback residual and LibTorch generator, when the checkpoint has
  // them (save_local_state); else the residual starts again empty.
  const std::string mine = "residual/" + std::to_string(w.spec.rank);
  if (w.sign) w.sign->reset();
  if (w.topk) w.topk->reset();
  if ((w.sign || w.topk) && state.find(mine) != nullptr) {
    std::vector<float> residual(w.flat.size());
    auto t = torch::from_blob(residual.data(), {static_cast<std::int64_t>(residual.size())}, torch::kFloat);
    check(checkpoint::load_tensor(state, mine, t));
    check(w.sign ? w.sign->restore(residual) : w.topk->restore(residual));
  }
  if (const std::string rng = "rng/torch/" + std::to_string(w.spec.rank); state.find(rng) != nullptr)
    check(checkpoint::load_torch_rng(state, rng));
  // The loader has no seek: a fresh one, and the batches the run had taken are drawn again
  // and dropped (the same seed gives the same batches in the same order).
  if (w.stepper) w.stepper->drain();
  w.open_loader();
  for (std::int64_t i = 0; i < w.step * w.spec.config.accumulate_steps; ++i) (void)w.loader->next();
  return w.step;
}

checkpoint::snapshot trainer_worker::save_local_state() {
  auto& w = *impl_;
  checkpoint::snapshot s;
  if (w.sign || w.topk) {
    const auto r = w.sign ? w.sign->residual() : w.topk->residual();
    std::vector<float> copy(r.begin(), r.end());
    const auto t = torch::from_blob(copy.data(), {static_cast<std::int64_t>(copy.size())}, torch::kFloat);
    checkpoint::add_tensor(s, "residual/" + std::to_string(w.spec.rank), t, checkpoint::tensor_bytes::copy);
  }
  checkpoint::add_torch_rng(s, "rng/torch/" + std::to_string(w.spec.rank));
  return s;
}

bool trainer_worker::abort_collective(std::string reason) {
  auto& w = *impl_;
  std::lock_guard lock(w.group_mutex);
  if (!w.group) return false;
  w.group->abort(reason);
  return true;
}

std::int64_t trainer_worker::rejoin(std::string group) {
  return torch_edge("rejoining the survivors", [&] {
    auto& w = *impl_;
    {
      std::lock_guard lock(w.group_mutex);
      w.group.reset();  // the broken one
    }
    w.spec.group = std::move(group);
    auto g = collective::group::join(w.group_options());
    if (!g) fail("worker " + std::to_string(w.spec.rank) + " cannot join group '" + w.spec.group + "': " + g.error().message());
    {
      std::lock_guard lock(w.group_mutex);
      w.group.emplace(std::move(*g));
    }
    auto& grp = *w.group;
    auto must = [&](expected<void> ok, const char* what) {
      if (!ok) fail(std::string("rejoining: ") + what + ": " + ok.error().message());
    };
    // The root: the most steps applied, the lowest rank of those (a replacement has -1).
    const std::int64_t mine = w.started ? w.applied : -1;
    std::int64_t most[1] = {mine};
    must(grp.allreduce(std::span<std::int64_t>(most), collective::op::max), "finding the most steps applied");
    std::int64_t root[1] = {most[0] == mine ? w.spec.rank : w.spec.world};
    must(grp.allreduce(std::span<std::int64_t>(root), collective::op::min), "choosing the root");
    const int from = static_cast<int>(root[0]);
    // A survivor cut short in a step puts its residual back (what it sent is void now).
    if (w.started && w.step != w.applied && !w.residual_before.empty()) {
      if (w.sign) must(w.sign->restore(w.residual_before), "the residual");
      if (w.topk) must(w.topk->restore(w.residual_before), "the residual");
    }
    // The root's step and optimiser state's size, its weights, then the state's bytes.
    std::vector<std::uint8_t> state;
    if (w.spec.rank == from) {
      checkpoint::snapshot s;
      if (auto ok = checkpoint::add_optimizer(s, "optimizer", *w.optimizer); !ok) fail(ok.error().message());
      const auto& data = s.find("optimizer")->data;
      state.assign(reinterpret_cast<const std::uint8_t*>(data.data()), reinterpret_cast<const std::uint8_t*>(data.data()) + data.size());
    }
    // The step, the state's size, and the loss scaler's state (the scale's bits).
    std::int64_t header[6] = {w.applied, static_cast<std::int64_t>(state.size())};
    if (w.scaler) {
      const auto& st = w.scaler->state();
      header[2] = std::bit_cast<std::int64_t>(st.scale);
      header[3] = st.clean_steps;
      header[4] = st.overflows;
      header[5] = st.growths;
    }
    must(grp.broadcast(std::span<std::int64_t>(header), from), "the root's step");
    if (w.scaler && w.spec.rank != from)
      must(w.scaler->restore({.scale = std::bit_cast<double>(header[2]), .clean_steps = header[3],
                              .overflows = header[4], .growths = header[5]}),
           "the root's loss scale");
    w.gather(/*grads=*/false);
    must(grp.broadcast(std::span(w.flat), from), "the root's weights");
    state.resize(static_cast<std::size_t>(header[1]));
    must(grp.broadcast(std::span(state), from), "the root's optimiser state");
    if (w.spec.rank != from) {
      w.scatter(/*grads=*/false);
      checkpoint::snapshot s;
      s.add_bytes("optimizer", celer::bytes(std::move(state)), {{"format", "torch.serialize"}});
      if (auto ok = checkpoint::load_optimizer(s, "optimizer", *w.optimizer); !ok) fail(ok.error().message());
    }
    if (!w.started && w.sign) w.sign->reset();
    if (!w.started && w.topk) w.topk->reset();
    w.started = true;
    w.step = w.applied = header[0];
    // Every loader to that step (no seek: a fresh one, the batches taken drawn and dropped).
    if (w.stepper) w.stepper->drain();
    w.open_loader();
    for (std::int64_t i = 0; i < w.step * w.spec.config.accumulate_steps; ++i) (void)w.loader->next();
    return w.step;
  });
}

std::unique_ptr<trainer_worker> make_trainer_worker(worker_spec spec) { return std::make_unique<trainer_worker>(spec); }

} // namespace celer::train_app

CELER_REMOTE(celer::train_app::make_trainer_worker, &celer::train_app::trainer_worker::start,
             &celer::train_app::trainer_worker::run_steps, &celer::train_app::trainer_worker::evaluate,
             &celer::train_app::trainer_worker::parameters_digest, &celer::train_app::trainer_worker::save_state,
             &celer::train_app::trainer_worker::load_state, &celer::train_app::trainer_worker::enter_async,
             &celer::train_app::trainer_worker::finish_async, &celer::train_app::trainer_worker::save_local_state,
             &celer::train_app::trainer_worker::abort_collective, &celer::train_app::trainer_worker::rejoin,
             &celer::train_app::trainer_worker::measure_speed, &celer::train_app::trainer_worker::set_batch_split,
             &celer::train_app::trainer_worker::join_async, &celer::train_app::trainer_worker::last_call_figures);
