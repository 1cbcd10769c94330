// A LibTorch trainer's state through the checkpoint writers (<celer/actors/torch/checkpoint.hpp>):
// restored exactly, refused clearly when it is another model's, and, killed with SIGKILL and
// resumed, the same losses bit for bit (the trainer is celer-bench-train-checkpoint --losses).
#include <celer/actors/checkpoint.hpp>
#include <celer/actors/torch/checkpoint.hpp>
#include <celer/actors/torch/model.hpp>
#include <celer/codec.hpp>

#include "checkpoint_fixtures.hpp"
#include "resume_child.hpp"

#include <catch2/catch.hpp>
#include <torch/torch.h>

namespace ckpt = celer::checkpoint;

namespace {

/// A small MLP with dropout and Adam, after `steps` steps on random data (seeded).
struct small_trainer {
  torch::nn::Sequential net{nullptr};
  std::unique_ptr<torch::optim::Optimizer> opt;
  explicit small_trainer(int width) {
    net = celer::actors::make_model({.kind = "mlp", .width = width, .depth = 2, .dropout = 0.3, .seed = 3}, {16}, 4)
            .value();
    opt = celer::actors::make_optimizer(net, {.name = "adam", .lr = 1e-2}).value();
  }
  /// One step on a batch drawn from LibTorch's generator (as dropout is); its loss.
  float step() {
    const auto x = torch::randn({32, 16});
    const auto y = torch::randint(0, 4, {32}, torch::kLong);
    opt->zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt->step();
    return loss.item<float>();
  }
  ckpt::snapshot state() const {
    ckpt::snapshot s;
    ckpt::add_module(s, "model", *net, ckpt::tensor_bytes::copy);
    REQUIRE(ckpt::add_optimizer(s, "optimizer", *opt));
    ckpt::add_torch_rng(s, "rng/torch");
    return s;
  }
};

} // namespace

TEST_CASE("a model, its optimiser and LibTorch's generator come back bit for bit", "[torch][checkpoint]") {
  checkpoint_test::temp_dir dir;
  torch::manual_seed(1);
  small_trainer a(32);
  for (int i = 0; i < 5; ++i) (void)a.step();
  auto s = a.state();
  s.set_step(5);
  const auto* w = s.find("model/1.weight");
  REQUIRE(w != nullptr);
  CHECK(w->attributes.at("dtype") == "float32");
  CHECK(w->attributes.at("shape") == "32,16");
  REQUIRE(ckpt::write(s, dir.both()));

  // The run goes on: these are the losses a restored copy must reproduce.
  std::vector<float> expected;
  for (int i = 0; i < 5; ++i) expected.push_back(a.step());

  torch::manual_seed(99);  // elsewhere in its generator, with other initial weights
  small_trainer b(32);
  auto back = ckpt::restore(dir.both());
  REQUIRE(back);
  REQUIRE(ckpt::load_module(back->data, "model", *b.net));
  REQUIRE(ckpt::load_optimizer(back->data, "optimizer", *b.opt));
  REQUIRE(ckpt::load_torch_rng(back->data, "rng/torch"));
  for (int i = 0; i < 5; ++i) {
    INFO("step " << i + 6);
    CHECK(b.step() == expected[static_cast<std::size_t>(i)]);  // exact, not approximately
  }
}

TEST_CASE("another model's checkpoint is refused, naming the tensor, and changes nothing", "[torch][checkpoint]") {
  torch::manual_seed(1);
  small_trainer wide(64), narrow(32);
  const auto s = wide.state();
  const auto before = narrow.net->parameters()[0].clone();
  const auto r = ckpt::load_module(s, "model", *narrow.net);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == celer::error_code::invalid_argument);
  CHECK_THAT(r.error().message(), Catch::Contains("model/1.weight") && Catch::Contains("64,16") &&
                                    Catch::Contains("32,16"));
  CHECK(torch::equal(narrow.net->parameters()[0], before));

  const auto missing = ckpt::load_module(s, "other", *narrow.net);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == celer::error_code::not_found);

  ckpt::snapshot junk;
  junk.add_bytes("optimizer", celer::bytes(std::string_view("not a torch archive")));
  const auto bad = ckpt::load_optimizer(junk, "optimizer", *narrow.opt);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == celer::error_code::data_loss);
}

TEST_CASE("a snapshot is a celer value: it packs and unpacks whole", "[torch][checkpoint]") {
  torch::manual_seed(1);
  small_trainer a(8);
  (void)a.step();
  auto s = a.state();
  s.set_step(1);
  s.set_metadata("trial", "trial_0003");
  s.add_int("epoch", 1);
  const auto back = celer::detail::unpack<ckpt::snapshot>(celer::detail::pack(s), "snapshot");
  CHECK(back.step() == 1);
  CHECK(back.metadata().at("trial") == "trial_0003");
  CHECK(back.get_int("epoch").value() == 1);
  REQUIRE(back.entries().size() == s.entries().size());
  for (std::size_t i = 0; i < s.entries().size(); ++i) {
    CHECK(back.entries()[i].name == s.entries()[i].name);
    CHECK(back.entries()[i].attributes == s.entries()[i].attributes);
    CHECK(back.entries()[i].data == s.entries()[i].data);
  }
}

TEST_CASE("a LibTorch run killed with SIGKILL and resumed gives the same losses, bit for bit",
          "[torch][checkpoint][resume]") {
  using resume_test::child;
  checkpoint_test::temp_dir reference_dir, killed_dir;
  // An MLP with dropout and Adam on the digits, one thread, 240 steps of 32 samples.
  const std::vector<std::string> common{"--losses", "--data", "digits", "--width", "64", "--batch", "32",
                                        "--steps", "240", "--every", "40"};
  auto args = [&](const checkpoint_test::temp_dir& d, std::vector<std::string> more) {
    auto a = common;
    a.push_back("--dir");
    a.push_back(d.path.string());
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  child reference(CELER_TRAIN_CHECKPOINT, args(reference_dir, {}));
  const auto expected = resume_test::read_all(reference);
  REQUIRE(reference.exit_code() == 0);
  REQUIRE(expected.done);
  REQUIRE(expected.loss.size() == 240);
  CHECK(expected.loss.at(240) != expected.loss.at(1));

  {
    // Killed just after save(120) returned: checkpoint 80 is durable (it waited), 120 may be.
    child victim(CELER_TRAIN_CHECKPOINT, args(killed_dir, {"--pause-after", "120"}));
    bool persisted = false, paused = false;
    while (!paused) {
      const std::string l = victim.line();
      if (l.empty()) break;
      if (l == "persisted 80") persisted = true;
      if (l == "paused 120") paused = true;
    }
    REQUIRE(persisted);
    REQUIRE(paused);
    victim.kill_now();
  }

  child resumed(CELER_TRAIN_CHECKPOINT, args(killed_dir, {"--resume"}));
  const auto after = resume_test::read_all(resumed);
  REQUIRE(resumed.exit_code() == 0);
  REQUIRE(after.done);
  CHECK((after.restored == 80 || after.restored == 120));
  REQUIRE(after.loss.size() == static_cast<std::size_t>(240 - after.restored));
  for (const auto& [step, loss] : after.loss) {
    INFO("step " << step);
    CHECK(loss == expected.loss.at(step));
  }
}
