// celer-bench-param-server: a parameter server written the way a new user writes one. One
// actor holds N floats; W tasks each pull the weights, compute a gradient from them and push
// it back, R rounds. Reports the bytes moved per second (pulled + pushed). The same app with
// `--type array` uses celer::array<float> instead of std::vector<float>; bench/peers/
// ray_param_server.py is the same app on Ray with numpy arrays.
//
//   celer-bench-param-server [--type vector|array] [--floats N] [--workers W] [--rounds R]
//                            [--json FILE] [--smoke] [--celer-address=HOST:PORT]
#include <celer/celer.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

/// The server: weights as a std::vector<float> (what a new user writes).
struct vector_server {
  explicit vector_server(int n) : weights(static_cast<std::size_t>(n), 1.0f) {}
  std::vector<float> pull() const { return weights; }
  int push(std::vector<float> grad) {
    for (std::size_t i = 0; i < weights.size() && i < grad.size(); ++i) weights[i] -= 0.01f * grad[i];
    return ++version;
  }
  std::vector<float> weights;
  int version = 0;
};
vector_server* make_vector_server(int n) { return new vector_server(n); }

double vector_worker(celer::actor_handle<vector_server> ps, int rounds) {
  double moved = 0;
  for (int r = 0; r < rounds; ++r) {
    const std::vector<float> w = celer::get(ps.task(&vector_server::pull).remote());
    std::vector<float> grad(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) grad[i] = 0.001f * w[i];
    (void)celer::get(ps.task(&vector_server::push).remote(std::move(grad)));
    moved += 2.0 * static_cast<double>(w.size() * sizeof(float));
  }
  return moved;
}

/// The same with celer::array<float>.
struct array_server {
  explicit array_server(int n) : weights(static_cast<std::size_t>(n)) {
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 1.0f;
  }
  celer::array<float> pull() const { return weights; }
  int push(celer::array<float> grad) {
    float* w = weights.data();
    for (std::size_t i = 0; i < weights.size() && i < grad.size(); ++i) w[i] -= 0.01f * grad.begin()[i];
    return ++version;
  }
  celer::array<float> weights;
  int version = 0;
};
array_server* make_array_server(int n) { return new array_server(n); }

double array_worker(celer::actor_handle<array_server> ps, int rounds) {
  double moved = 0;
  for (int r = 0; r < rounds; ++r) {
    const celer::array<float> w = celer::get(ps.task(&array_server::pull).remote());
    celer::array<float> grad(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) grad[i] = 0.001f * w.begin()[i];
    (void)celer::get(ps.task(&array_server::push).remote(std::move(grad)));
    moved += 2.0 * static_cast<double>(w.size() * sizeof(float));
  }
  return moved;
}

} // namespace

CELER_REMOTE(make_vector_server, &vector_server::pull, &vector_server::push, vector_worker,
             make_array_server, &array_server::pull, &array_server::push, array_worker);

namespace {

template <class Server, class Make, class Worker>
double run(Make make, Worker worker, int floats, int workers, int rounds) {
  auto ps = celer::actor(make).options({.num_cpus = 0}).remote(floats);
  // The server exists and has its weights before the clock starts.
  (void)celer::get(ps.task(&Server::push).remote(decltype(Server::weights)()));
  const auto start = std::chrono::steady_clock::now();
  std::vector<celer::object_ref<double>> runs;
  for (int i = 0; i < workers; ++i) runs.push_back(celer::task(worker).options({.num_cpus = 1}).remote(ps, rounds));
  double moved = 0;
  for (double m : celer::get(runs)) moved += m;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  celer::kill(ps);
  return moved / seconds / 1e6;
}

} // namespace

int main(int argc, char** argv) {
  celer::serve_if_worker();
  std::string type = "vector";
  std::string json;
  int floats = 1 << 20;
  int workers = 4;
  int rounds = 50;
  int trials = 3;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "celer-bench-param-server: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--type") {
      type = value();
    } else if (a == "--floats") {
      floats = std::stoi(value());
    } else if (a == "--workers") {
      workers = std::stoi(value());
    } else if (a == "--rounds") {
      rounds = std::stoi(value());
    } else if (a == "--trials") {
      trials = std::stoi(value());
    } else if (a == "--json") {
      json = value();
    } else if (a == "--smoke") {
      floats = 1 << 16;
      rounds = 3;
      trials = 1;
    } else if (a == "-h" || a == "--help") {
      std::cout
        << "usage: celer-bench-param-server [--type vector|array] [--floats N] [--workers W]\n"
           "         [--rounds R] [--trials T] [--json FILE] [--smoke] [--celer-address=HOST:PORT]\n"
           "A parameter server as a new user writes it: one actor holds N floats (default 2^20),\n"
           "W tasks (default 4) each pull them, compute a gradient and push it, R rounds (50).\n"
           "Prints MB/s moved (pulled + pushed), mean of T trials (3). --type vector uses\n"
           "std::vector<float>, --type array celer::array<float>. Embedded by default; on a\n"
           "cluster with --celer-address or CELER_ADDRESS.\n";
      return 0;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (type != "vector" && type != "array") {
    std::cerr << "celer-bench-param-server: --type is vector or array, not " << type << "\n";
    return 2;
  }
  int rest_argc = static_cast<int>(rest.size());
  celer::init(rest_argc, rest.data());
  std::vector<double> mbs;
  for (int t = 0; t < trials; ++t) {
    mbs.push_back(type == "vector"
                    ? run<vector_server>(make_vector_server, vector_worker, floats, workers, rounds)
                    : run<array_server>(make_array_server, array_worker, floats, workers, rounds));
  }
  double mean = 0;
  for (double m : mbs) mean += m / static_cast<double>(mbs.size());
  double var = 0;
  for (double m : mbs) var += (m - mean) * (m - mean) / static_cast<double>(mbs.size());
  std::cout << "param_server_" << type << "_mb_per_s " << mean << " +- " << std::sqrt(var) << "  ("
            << floats << " floats, " << workers << " workers, " << rounds << " rounds, " << trials
            << " trials)\n";
  if (!json.empty()) {
    std::ofstream(json) << nlohmann::json{{"name", "param_server_" + type + "_mb_per_s"},
                                          {"mean", mean}, {"std", std::sqrt(var)},
                                          {"floats", floats}, {"workers", workers},
                                          {"rounds", rounds}, {"trials", mbs}}
                        << "\n";
  }
  celer::shutdown();
  return 0;
}
