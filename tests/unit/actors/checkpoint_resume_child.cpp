// A small trainer for the exact-resume test (checkpoint_resume_test.cpp): linear regression
// by SGD with momentum on synthetic data, with a shuffled data order, a noise RNG, and a
// checkpoint every N steps through a checkpointer (embedded runtime, both tiers). It prints
// each step's loss as a C99 hex float, so two runs compare bit for bit.
//
//   celer_checkpoint_resume_child DIR STEPS EVERY [--resume] [--pause-after N]
//
// --pause-after N: after step N (and its save), print "paused N" and wait for stdin to
// close, so that a test can SIGKILL it at a known step while its writers are busy.
//
// Everything a step depends on is in the checkpoint: the weights, the momentum, the data
// order and position, both RNG engines, the step. No std::*_distribution keeps state
// between steps (a normal_distribution caches its second value, which saving the engine
// alone would lose): numbers are made from the engines' raw output.
#include <celer/actors/checkpoint.hpp>
#include <celer/celer.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::size_t dims = 1 << 16;
constexpr std::size_t samples = 256;
constexpr std::size_t batch = 8;

/// Sample i's features, in [-0.5, 0.5), made from its index alone.
float feature(std::size_t i, std::size_t d) {
  std::uint64_t z = (i * dims + d) * 0x9e3779b97f4a7c15ULL + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<float>((z ^ (z >> 31)) >> 40) / static_cast<float>(1 << 24) - 0.5f;
}

float uniform(std::mt19937_64& g) { return static_cast<float>(g() >> 40) / static_cast<float>(1 << 24); }

int fail(const std::string& what) {
  std::fprintf(stderr, "child: %s\n", what.c_str());
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  celer::serve_if_worker();
  if (argc < 4) return fail("usage: DIR STEPS EVERY [--resume] [--pause-after N]");
  const std::string dir = argv[1];
  const std::int64_t steps = std::atoll(argv[2]);
  const std::int64_t every = std::atoll(argv[3]);
  bool resume = false;
  std::int64_t pause_after = -1;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--resume") resume = true;
    if (a == "--pause-after" && i + 1 < argc) pause_after = std::atoll(argv[++i]);
  }
  celer::init({.num_cpus = 2});
  const celer::checkpoint::options opts{.fast_dir = dir + "/fast", .archive_dir = dir + "/archive"};

  std::vector<float> w(dims, 0.0f), momentum(dims, 0.0f), truth(dims);
  for (std::size_t d = 0; d < dims; ++d) truth[d] = feature(samples + 7, d);
  std::vector<std::int32_t> order(samples);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 data_rng(11), noise_rng(12);
  std::int64_t position = 0, step = 0;
  std::shuffle(order.begin(), order.end(), data_rng);

  if (resume) {
    auto back = celer::checkpoint::restore(opts);
    if (!back) return fail(back.error().to_string());
    const auto& s = back->data;
    auto load = [&](const char* name, void* out, std::size_t bytes) {
      const auto* e = s.find(name);
      if (e == nullptr || e->data.size() != bytes) std::exit(fail(std::string("bad entry ") + name));
      std::copy_n(e->data.data(), bytes, static_cast<std::uint8_t*>(out));
    };
    load("model/w", w.data(), dims * sizeof(float));
    load("optimizer/momentum", momentum.data(), dims * sizeof(float));
    load("data/order", order.data(), samples * sizeof(std::int32_t));
    position = s.get_int("data/position").value();
    step = s.step();
    if (!s.get_rng("rng/data", data_rng) || !s.get_rng("rng/noise", noise_rng)) {
      return fail("bad RNG state");
    }
    std::printf("restored %lld\n", static_cast<long long>(step));
  }

  auto ck = celer::checkpoint::checkpointer::open(opts);
  if (!ck) return fail(ck.error().to_string());
  const float lr = 0.05f, beta = 0.9f;
  std::vector<float> grad(dims);
  while (step < steps) {
    ++step;
    std::fill(grad.begin(), grad.end(), 0.0f);
    float loss = 0;
    for (std::size_t b = 0; b < batch; ++b) {
      if (position == static_cast<std::int64_t>(samples)) {
        std::shuffle(order.begin(), order.end(), data_rng);
        position = 0;
      }
      const auto i = static_cast<std::size_t>(order[static_cast<std::size_t>(position++)]);
      float pred = 0, target = 0;
      for (std::size_t d = 0; d < dims; ++d) {
        const float x = feature(i, d);
        pred += w[d] * x;
        target += truth[d] * x;
      }
      target += 0.01f * (uniform(noise_rng) - 0.5f);
      const float err = pred - target;
      loss += err * err / batch;
      for (std::size_t d = 0; d < dims; ++d) grad[d] += 2 * err * feature(i, d) / batch;
    }
    for (std::size_t d = 0; d < dims; ++d) {
      momentum[d] = beta * momentum[d] + grad[d];
      w[d] -= lr * momentum[d];
    }
    std::printf("loss %lld %a\n", static_cast<long long>(step), static_cast<double>(loss));
    std::fflush(stdout);
    if (step % every == 0) {
      celer::checkpoint::snapshot s;
      s.set_step(step);
      s.add_view("model/w", w.data(), dims * sizeof(float), {{"dtype", "float32"}});
      s.add_view("optimizer/momentum", momentum.data(), dims * sizeof(float));
      s.add_view("data/order", order.data(), samples * sizeof(std::int32_t), {{"dtype", "int32"}});
      s.add_int("data/position", position);
      s.add_rng("rng/data", data_rng);
      s.add_rng("rng/noise", noise_rng);
      if (auto id = ck->save(s); !id) return fail(id.error().to_string());
      if (step == 2 * every) {
        if (auto ok = ck->wait(); !ok) return fail(ok.error().to_string());
        std::printf("persisted %lld\n", static_cast<long long>(step));
        std::fflush(stdout);
      }
    }
    if (step == pause_after) {
      std::printf("paused %lld\n", static_cast<long long>(step));
      std::fflush(stdout);
      while (std::getchar() != EOF) {
      }
    }
  }
  if (auto ok = ck->wait(); !ok) return fail(ok.error().to_string());
  std::printf("done\n");
  celer::shutdown();
  return 0;
}
