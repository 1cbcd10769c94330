// celer::torch: tensors as celer objects, and the apps' models learning real data.
#include <celer/actors/torch.hpp>
#include <celer/actors/torch/model.hpp>
#include <celer/celer.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <random>

namespace {

torch::Tensor scale(torch::Tensor t, double by) { return t * by; }
bool arrived_as_view(torch::Tensor t) { return celer::torch_io::is_store_view(t); }
double tensor_sum(torch::Tensor t) { return t.sum().item<double>(); }

struct scoped_runtime {
  scoped_runtime() { celer::init({.num_cpus = 2}); }
  ~scoped_runtime() { celer::shutdown(); }
};

} // namespace

CELER_REMOTE(scale, arrived_as_view, tensor_sum);

TEST_CASE("a tensor packs as one bin: a 64-byte header, then its elements", "[torch]") {
  const auto t = torch::arange(12, torch::kFloat).reshape({3, 4});
  const auto packed = celer::detail::pack(t);
  // bin8 (2 bytes of header) of 64 + 48 bytes.
  REQUIRE(packed.size() == 2 + 64 + 48);
  CHECK(packed.substr(2, 7) == "celerT1");
  CHECK(std::memcmp(packed.data() + 2 + 64, t.data_ptr(), 48) == 0);
  const auto back = celer::detail::unpack<torch::Tensor>(packed, "t");
  CHECK(back.sizes() == t.sizes());
  CHECK(torch::equal(back, t));
  CHECK_FALSE(celer::torch_io::is_store_view(back));  // not from the store: a copy
}

TEST_CASE("every carried dtype and shape round-trips exactly; others are refused clearly", "[torch]") {
  for (auto type : {torch::kFloat, torch::kDouble, torch::kHalf, torch::kBFloat16, torch::kChar,
                    torch::kByte, torch::kShort, torch::kInt, torch::kLong, torch::kBool}) {
    INFO(c10::toString(type));
    const auto t = (torch::rand({2, 3, 5}) * 100).to(type);
    const auto back = celer::detail::unpack<torch::Tensor>(celer::detail::pack(t), "t");
    CHECK(back.scalar_type() == type);
    CHECK(torch::equal(back, t));
  }
  // A scalar, an empty tensor, a non-contiguous view, an undefined tensor.
  CHECK(celer::detail::unpack<torch::Tensor>(celer::detail::pack(torch::tensor(3.5)), "t").item<double>() == 3.5);
  CHECK(celer::detail::unpack<torch::Tensor>(celer::detail::pack(torch::empty({0, 7})), "t").sizes() ==
        torch::IntArrayRef({0, 7}));
  const auto m = torch::arange(6, torch::kLong).reshape({2, 3});
  CHECK(torch::equal(celer::detail::unpack<torch::Tensor>(celer::detail::pack(m.t()), "t"), m.t()));
  CHECK_FALSE(celer::detail::unpack<torch::Tensor>(celer::detail::pack(torch::Tensor()), "t").defined());
  CHECK_THROWS_WITH(celer::detail::pack(torch::zeros({2}, torch::kComplexFloat)),
                    Catch::Contains("cannot carry tensors of dtype ComplexFloat"));
  // Bytes that are not a tensor are a type error, whatever their size.
  CHECK_THROWS_WITH(celer::detail::unpack<torch::Tensor>(celer::detail::pack(celer::bytes("not a tensor")), "argument 1 of f"),
                    Catch::Contains("argument 1 of f does not match the expected type"));
  auto forged = celer::detail::pack(torch::zeros({4}));
  forged[2 + 16] = 5;  // the size says 5 elements, the body holds 4
  CHECK_THROWS(celer::detail::unpack<torch::Tensor>(forged, "t"));
}

TEST_CASE("a large tensor is stored once and read back as a view of the store", "[torch]") {
  scoped_runtime rt;
  const auto big = torch::rand({1024, 1024});  // 4 MiB
  const auto ref = celer::put(big);
  const torch::Tensor back = celer::get(ref);
  CHECK(celer::torch_io::is_store_view(back));
  CHECK(reinterpret_cast<std::uintptr_t>(back.data_ptr()) % 64 == 0);
  CHECK(torch::equal(back, big));
  // writable() gives memory of its own; the view is untouched by changing it.
  auto mine = celer::torch_io::writable(back);
  CHECK_FALSE(celer::torch_io::is_store_view(mine));
  mine.add_(1);
  CHECK(torch::equal(back, big));
  // As an argument: a task on the node maps it too; its result comes back equal.
  CHECK(celer::get(celer::task(arrived_as_view).remote(ref)));
  CHECK(celer::get(celer::task(tensor_sum).remote(big)) == Approx(big.sum().item<double>()));
  CHECK(torch::allclose(celer::get(celer::task(scale).remote(big, 2.0)), big * 2));
  // Small tensors travel inline, as copies.
  const torch::Tensor small = celer::get(celer::put(torch::ones({3})));
  CHECK_FALSE(celer::torch_io::is_store_view(small));
}

TEST_CASE("the MLP learns the UCI digits to over 90% validation accuracy in five epochs", "[torch][model]") {
  torch::set_num_threads(1);
  auto all = celer::actors::load_digits();
  REQUIRE(all.has_value());
  auto [train, valid] = celer::actors::split(*all, 0.2, 1);
  auto net = celer::actors::make_model({.kind = "mlp", .width = 64, .depth = 2, .seed = 3}, train.sample_shape, 10);
  REQUIRE(net.has_value());
  auto opt = celer::actors::make_optimizer(*net, {.name = "adam", .lr = 3e-3});
  REQUIRE(opt.has_value());
  std::mt19937_64 order(5);
  double first_loss = 0;
  celer::actors::epoch_stats fit;
  for (int epoch = 1; epoch <= 5; ++epoch) {
    fit = celer::actors::train_epoch(*net, **opt, train, 32, order);
    if (epoch == 1) first_loss = fit.loss;
  }
  const auto val = celer::actors::evaluate(*net, valid);
  CHECK(fit.loss < first_loss / 4);
  CHECK(val.accuracy > 0.90);
  CHECK(val.samples == static_cast<std::int64_t>(valid.size()));
}

TEST_CASE("training is deterministic: the same seeds give the same losses, bit for bit", "[torch][model]") {
  torch::set_num_threads(1);
  auto all = celer::actors::load_digits();
  REQUIRE(all.has_value());
  auto run = [&](const std::string& kind) {
    auto net = celer::actors::make_model({.kind = kind, .width = 16, .depth = 2, .dropout = 0.1, .seed = 9},
                                         all->sample_shape, 10);
    REQUIRE(net.has_value());
    auto opt = celer::actors::make_optimizer(*net, {.name = "sgd", .lr = 0.05});
    REQUIRE(opt.has_value());
    std::mt19937_64 order(11);
    std::vector<double> losses;
    for (int epoch = 0; epoch < 2; ++epoch) losses.push_back(celer::actors::train_epoch(*net, **opt, *all, 64, order).loss);
    return losses;
  };
  for (const std::string kind : {"mlp", "cnn"}) {
    INFO(kind);
    const auto a = run(kind);
    const auto b = run(kind);
    CHECK(a == b);
    CHECK(a[1] < a[0]);
  }
}

TEST_CASE("bad model and optimiser settings are refused with the reason", "[torch][model]") {
  CHECK_THAT(celer::actors::make_model({.kind = "rnn"}, {64}, 10).error().message(), Catch::Contains("unknown model kind"));
  CHECK_THAT(celer::actors::make_model({.kind = "mlp", .dropout = 1.5}, {64}, 10).error().message(), Catch::Contains("dropout"));
  CHECK_THAT(celer::actors::make_model({.kind = "cnn", .depth = 4}, {64}, 10).error().message(), Catch::Contains("to nothing"));
  CHECK_THAT(celer::actors::make_model({.kind = "cnn"}, {10}, 10).error().message(), Catch::Contains("a cnn needs samples"));
  auto net = celer::actors::make_model({}, {64}, 10);
  REQUIRE(net.has_value());
  CHECK_THAT(celer::actors::make_optimizer(*net, {.name = "lion"}).error().message(), Catch::Contains("unknown optimiser"));
  CHECK_THAT(celer::actors::make_optimizer(*net, {.lr = 0}).error().message(), Catch::Contains("learning rate"));
}
