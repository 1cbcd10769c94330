// celer-bench-train-checkpoint: what checkpointing every N steps costs a LibTorch trainer,
// and the trainer of the exact-resume test.
//
// A LibTorch model (an MLP by default) trains on Fashion-MNIST (digits when Debian's
// dataset-fashion-mnist is not installed) one minibatch per step, on one thread. Its whole
// state goes into each checkpoint through <celer/actors/torch/checkpoint.hpp>: parameters,
// Adam's moments, LibTorch's generator (dropout), the batches' order and position, the step.
//
// Benchmark (the default): rounds of `--steps` steps each, alternating
//   none   no checkpoints;
//   async  a checkpointer (embedded runtime, both tiers) saves every `--every` steps: save()
//          copies the state into the object store and returns, writer actors persist it;
//   sync   write() every `--every` steps, in the trainer's thread (what a trainer without
//          writers does: torch::save in the loop);
// and prints the median step time of each with the overhead against `none`, the bytes a full
// and an incremental checkpoint wrote, and the restore time (the restored model is compared
// with the trained one, bit for bit).
//
//   build/bench/celer-bench-train-checkpoint [--steps 1000] [--every 100] [--rounds 3]
//       [--width 256] [--depth 2] [--batch 64] [--data fashion-mnist|digits] [--dir DIR]
//
// Test mode (tests/unit/actors/torch_resume_test.cpp): `--losses --dir DIR` trains `--steps`
// steps, saving every `--every`, and prints "loss STEP HEXFLOAT" per step, "persisted STEP"
// once the second checkpoint is durable, "paused STEP" at --pause-after (then waits for stdin
// to close, for the test's SIGKILL), and "done"; `--resume` starts from the newest whole
// checkpoint in DIR and prints "restored STEP" first.
#include <celer/actors/checkpoint.hpp>
#include <celer/actors/data.hpp>
#include <celer/actors/torch/checkpoint.hpp>
#include <celer/actors/torch/model.hpp>
#include <celer/celer.hpp>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace ckpt = celer::checkpoint;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

struct config {
  std::string data = "fashion-mnist";
  std::string model = "mlp";
  int width = 256;
  int depth = 2;
  double dropout = 0.1;
  std::int64_t batch = 64;
  std::int64_t steps = 1000;
  std::int64_t every = 100;
  int rounds = 3;
  int threads = 1;
  std::string dir;
  bool losses = false;
  bool resume = false;
  std::int64_t pause_after = -1;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "celer-bench-train-checkpoint: %s\n", what.c_str());
  std::exit(2);
}

celer::actors::dataset load(const config& c) {
  auto d = c.data == "digits" ? celer::actors::load_digits() : celer::actors::load_fashion_mnist(true);
  if (!d && c.data != "digits") {
    std::fprintf(stderr, "(Fashion-MNIST: %s; training on digits)\n", d.error().message().c_str());
    d = celer::actors::load_digits();
  }
  if (!d) die("cannot load the data: " + d.error().message());
  return std::move(*d);
}

/// One model, its optimiser and where it is in the data: everything a step depends on.
class trainer {
public:
  trainer(const config& c, const celer::actors::dataset& data) : c_(c), data_(data) {
    auto net = celer::actors::make_model({.kind = c.model, .width = c.width, .depth = c.depth,
                                          .dropout = c.dropout, .seed = 7},
                                         data.sample_shape, data.classes);
    if (!net) die(net.error().message());
    net_ = std::move(*net);
    auto opt = celer::actors::make_optimizer(net_, {.name = "adam", .lr = 1e-3});
    if (!opt) die(opt.error().message());
    opt_ = std::move(*opt);
    shape_ = data.sample_shape;
    if (c.model == "cnn" && shape_.size() == 1) {  // a flat square sample, as one channel
      const auto side = static_cast<std::int64_t>(std::lround(std::sqrt(static_cast<double>(shape_[0]))));
      shape_ = {1, side, side};
    }
    std::vector<std::int64_t> sizes{static_cast<std::int64_t>(data.size())};
    sizes.insert(sizes.end(), shape_.begin(), shape_.end());
    x_ = torch::from_blob(const_cast<float*>(data.x.data()), sizes, torch::kFloat);
    y_ = torch::from_blob(const_cast<std::int64_t*>(data.y.data()), {static_cast<std::int64_t>(data.size())},
                          torch::kLong);
    order_.resize(data.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::shuffle(order_.begin(), order_.end(), rng_);
    net_->train();
  }

  [[nodiscard]] std::int64_t step() const { return step_; }

  /// One minibatch; its loss.
  float train_step() {
    if (position_ + c_.batch > static_cast<std::int64_t>(order_.size())) {
      std::shuffle(order_.begin(), order_.end(), rng_);
      position_ = 0;
    }
    const auto idx = torch::from_blob(order_.data() + position_, {c_.batch}, torch::kLong);
    position_ += c_.batch;
    opt_->zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net_->forward(x_.index_select(0, idx)), y_.index_select(0, idx));
    loss.backward();
    opt_->step();
    ++step_;
    return loss.item<float>();
  }

  /// Everything the next step depends on. `how`: views for a save() made at once.
  ckpt::snapshot state(ckpt::tensor_bytes how) const {
    ckpt::snapshot s;
    s.set_step(step_);
    ckpt::add_module(s, "model", *net_, how);
    if (auto ok = ckpt::add_optimizer(s, "optimizer", *opt_); !ok) die(ok.error().message());
    ckpt::add_torch_rng(s, "rng/torch");
    s.add_rng("rng/order", rng_);
    s.add_view("data/order", order_.data(), order_.size() * sizeof(std::int64_t), {{"dtype", "int64"}});
    s.add_int("data/position", position_);
    return s;
  }

  void load(const ckpt::snapshot& s) {
    auto need = [](celer::expected<void> ok) {
      if (!ok) die(ok.error().message());
    };
    need(ckpt::load_module(s, "model", *net_));
    need(ckpt::load_optimizer(s, "optimizer", *opt_));
    need(ckpt::load_torch_rng(s, "rng/torch"));
    need(s.get_rng("rng/order", rng_));
    const auto* order = s.find("data/order");
    if (order == nullptr || order->data.size() != order_.size() * sizeof(std::int64_t)) die("bad entry data/order");
    std::memcpy(order_.data(), order->data.data(), order->data.size());
    position_ = s.get_int("data/position").value();
    step_ = s.step();
  }

  /// Whether `o`'s parameters are `this`'s, bit for bit.
  [[nodiscard]] bool same_weights(const trainer& o) const {
    const auto a = net_->parameters(), b = o.net_->parameters();
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!torch::equal(a[i], b[i])) return false;
    return true;
  }

private:
  const config& c_;
  const celer::actors::dataset& data_;
  torch::nn::Sequential net_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> opt_;
  std::vector<std::int64_t> shape_;
  torch::Tensor x_, y_;
  std::mt19937_64 rng_{11};
  std::vector<std::int64_t> order_;
  std::int64_t position_ = 0;
  std::int64_t step_ = 0;
};

ckpt::options tiers(const std::string& dir) {
  return {.fast_dir = dir + "/fast", .archive_dir = dir + "/archive"};
}

/// The exact-resume test's trainer (see the top of this file).
int run_losses(const config& c, const celer::actors::dataset& data) {
  if (c.dir.empty()) die("--losses needs --dir");
  const auto opts = tiers(c.dir);
  trainer t(c, data);
  if (c.resume) {
    auto back = ckpt::restore(opts);
    if (!back) die(back.error().to_string());
    t.load(back->data);
    std::printf("restored %lld\n", static_cast<long long>(t.step()));
  }
  auto ck = ckpt::checkpointer::open(opts);
  if (!ck) die(ck.error().to_string());
  while (t.step() < c.steps) {
    const float loss = t.train_step();
    std::printf("loss %lld %a\n", static_cast<long long>(t.step()), static_cast<double>(loss));
    std::fflush(stdout);
    if (t.step() % c.every == 0) {
      if (auto id = ck->save(t.state(ckpt::tensor_bytes::view)); !id) die(id.error().to_string());
      if (t.step() == 2 * c.every) {
        if (auto ok = ck->wait(); !ok) die(ok.error().to_string());
        std::printf("persisted %lld\n", static_cast<long long>(t.step()));
        std::fflush(stdout);
      }
    }
    if (t.step() == c.pause_after) {
      std::printf("paused %lld\n", static_cast<long long>(t.step()));
      std::fflush(stdout);
      while (std::getchar() != EOF) {
      }
    }
  }
  if (auto ok = ck->wait(); !ok) die(ok.error().to_string());
  std::printf("done\n");
  return 0;
}

double ms(clock_type::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
double mib(std::uint64_t b) { return static_cast<double>(b) / (1 << 20); }

template <class T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct round_result {
  double step_ms = 0;
  std::vector<ckpt::save_report> reports;
};

enum class mode { none, async, sync };
const char* name(mode m) { return m == mode::none ? "none" : m == mode::async ? "async" : "sync"; }

/// `c.steps` steps of a fresh trainer, checkpointing as `m` says into fresh tiers under `dir`.
round_result run_round(const config& c, const celer::actors::dataset& data, mode m, const std::string& dir,
                       trainer* keep_for_restore = nullptr) {
  fs::remove_all(dir);
  trainer local(c, data);
  trainer& t = keep_for_restore != nullptr ? *keep_for_restore : local;
  round_result r;
  std::optional<ckpt::checkpointer> ck;
  if (m == mode::async) {
    auto opened = ckpt::checkpointer::open(tiers(dir));
    if (!opened) die(opened.error().to_string());
    ck.emplace(std::move(*opened));
  }
  const auto start = clock_type::now();
  while (t.step() < c.steps) {
    (void)t.train_step();
    if (m == mode::none || t.step() % c.every != 0) continue;
    if (m == mode::async) {
      if (auto id = ck->save(t.state(ckpt::tensor_bytes::view)); !id) die(id.error().to_string());
    } else {
      auto report = ckpt::write(t.state(ckpt::tensor_bytes::view), tiers(dir));
      if (!report) die(report.error().to_string());
      r.reports.push_back(*report);
    }
  }
  // The steps' time: the async writers may still be persisting the last save, which the
  // trainer does not wait for (it goes on training); waiting is counted apart below.
  r.step_ms = ms(clock_type::now() - start) / static_cast<double>(c.steps);
  if (ck) {
    if (auto ok = ck->wait(); !ok) die(ok.error().to_string());
    r.reports = ck->take_reports();
  }
  return r;
}

int run_bench(const config& c, const celer::actors::dataset& data) {
  const std::string root = c.dir.empty() ? (fs::temp_directory_path() / ("celer-train-ckpt-" + std::to_string(::getpid()))).string() : c.dir;
  std::printf("model: %s width %d depth %d on %s (%zu samples), batch %lld, adam, %d thread(s)\n", c.model.c_str(),
              c.width, c.depth, data.name.c_str(), data.size(), static_cast<long long>(c.batch), c.threads);
  std::printf("%lld steps per round, a checkpoint every %lld steps, %d rounds alternating none/async/sync\n\n",
              static_cast<long long>(c.steps), static_cast<long long>(c.every), c.rounds);
  std::map<mode, std::vector<double>> step_ms;
  std::map<mode, std::vector<ckpt::save_report>> reports;
  (void)run_round(c, data, mode::none, root + "/warm");  // page in the data, warm the allocator
  for (int round = 0; round < c.rounds; ++round) {
    for (mode m : {mode::none, mode::async, mode::sync}) {
      auto r = run_round(c, data, m, root + "/" + name(m));
      step_ms[m].push_back(r.step_ms);
      if (round == 0) reports[m] = std::move(r.reports);
      std::printf("round %d %-5s %8.3f ms/step\n", round + 1, name(m), r.step_ms);
      std::fflush(stdout);
    }
  }
  const double base = median(step_ms[mode::none]);
  std::printf("\n%-44s %10s %10s\n", "", "ms/step", "overhead");
  for (mode m : {mode::none, mode::async, mode::sync}) {
    const double v = median(step_ms[m]);
    std::printf("%-44s %10.3f %9.2f%%\n", (std::string("median step, checkpoints: ") + name(m)).c_str(), v,
                100.0 * (v - base) / base);
  }
  // What the async saves wrote, and how long they held the trainer.
  const auto& saves = reports[mode::async];
  if (!saves.empty()) {
    std::vector<double> blocked, durable;
    std::uint64_t later = 0;
    for (std::size_t i = 0; i < saves.size(); ++i) {
      blocked.push_back(ms(saves[i].blocked));
      durable.push_back(ms(saves[i].archive.durable_after));
      if (i > 0) later += saves[i].fast.bytes_written;
    }
    std::printf("\n%-44s %10.2f MiB\n", "checkpoint (logical)", mib(saves[0].logical_bytes));
    std::printf("%-44s %10.2f MiB\n", "first checkpoint written (fast tier)", mib(saves[0].fast.bytes_written));
    if (saves.size() > 1)
      std::printf("%-44s %10.2f MiB\n", "later checkpoints written, mean (fast tier)",
                  mib(later / (saves.size() - 1)));
    std::printf("%-44s %10.2f ms\n", "save() held the trainer, median", median(blocked));
    std::printf("%-44s %10.2f ms\n", "durable in the archive after, median", median(durable));
  }
  if (!reports[mode::sync].empty()) {
    std::vector<double> busy;
    for (const auto& r : reports[mode::sync]) busy.push_back(ms(r.fast.busy + r.archive.busy));
    std::printf("%-44s %10.2f ms\n", "write() in the loop, median", median(busy));
  }
  // Restore: the newest checkpoint back into a fresh trainer, equal to the trained one.
  {
    trainer trained(c, data);
    (void)run_round(c, data, mode::async, root + "/restore", &trained);
    trainer back(c, data);
    const auto start = clock_type::now();
    auto r = ckpt::restore(tiers(root + "/restore"));
    if (!r) die(r.error().to_string());
    back.load(r->data);
    const double took = ms(clock_type::now() - start);
    const bool same = back.same_weights(trained) && back.step() == trained.step();
    std::printf("%-44s %10.2f ms  (%s, the weights %s)\n", "restore and load, newest checkpoint", took,
                r->source.c_str(), same ? "equal, bit for bit" : "DIFFER");
    if (!same) return 1;
  }
  fs::remove_all(root);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  celer::serve_if_worker();
  config c;
  CLI::App app{"What checkpointing every N steps costs a LibTorch trainer (celer::checkpoint writers "
               "against none and against write() in the loop), and the exact-resume test's trainer."};
  app.add_option("--data", c.data, "fashion-mnist or digits")->capture_default_str();
  app.add_option("--model", c.model, "mlp or cnn")->capture_default_str();
  app.add_option("--width", c.width, "units per hidden layer (cnn: channels)")->capture_default_str();
  app.add_option("--depth", c.depth, "hidden layers")->capture_default_str();
  app.add_option("--batch", c.batch, "samples per step")->capture_default_str();
  app.add_option("--steps", c.steps, "steps per round (--losses: in all)")->capture_default_str();
  app.add_option("--every", c.every, "steps between checkpoints")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--rounds", c.rounds, "rounds of each mode")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--threads", c.threads, "torch::set_num_threads")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--dir", c.dir, "where the tiers go (default: a temporary directory)");
  app.add_flag("--losses", c.losses, "test mode: print each step's loss, checkpoint into --dir");
  app.add_flag("--resume", c.resume, "test mode: start from --dir's newest checkpoint");
  app.add_option("--pause-after", c.pause_after, "test mode: after this step, wait for stdin to close");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(c.threads);
  const auto data = load(c);
  celer::init({.num_cpus = 2});
  const int rc = c.losses ? run_losses(c, data) : run_bench(c, data);
  celer::shutdown();
  return rc;
}
