// A coroutine actor: a gateway that answers many questions at once on its one thread. Each
// question goes through a tokenizer task, then a model actor; while one question waits for
// either, the gateway's thread takes the next (its state needs no lock). Prints how many
// questions were in flight at once, and checks every answer.
#include "report_errors.hpp"

#include <celer/celer.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

std::vector<std::string> tokenize(std::string text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

/// A stand-in for a model: a few milliseconds per answer, four answers at a time.
struct model {
  std::string answer(std::vector<std::string> tokens) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return std::to_string(tokens.size()) + " words, the last '" + (tokens.empty() ? "" : tokens.back()) + "'";
  }
};
model* make_model() { return new model(); }

struct gateway {
  celer::actor_handle<model> m;
  int in_flight = 0;
  int most_in_flight = 0;

  celer::future<std::string> ask(std::string question) {
    most_in_flight = std::max(most_in_flight, ++in_flight);
    auto tokens = co_await celer::task(tokenize).remote(question);  // parked: the thread is free
    std::string answer = co_await m.task(&model::answer).remote(tokens);
    --in_flight;
    co_return answer;
  }
  int most() const { return most_in_flight; }
};
gateway* make_gateway(celer::actor_handle<model> m) { return new gateway{m}; }

CELER_REMOTE(tokenize, make_model, &model::answer, make_gateway, &gateway::ask, &gateway::most);

int main(int argc, char** argv) {
  return report_errors([&] {
    celer::init(argc, argv);
    auto m = celer::actor(make_model).options({.max_concurrency = 4}).remote();
    auto g = celer::actor(make_gateway).remote(m);

    constexpr int questions = 200;
    const auto start = std::chrono::steady_clock::now();
    std::vector<celer::object_ref<std::string>> answers;
    for (int i = 0; i < questions; ++i) {
      answers.push_back(g.task(&gateway::ask).remote("question number " + std::to_string(i)));
    }
    int wrong = 0;
    const auto got = celer::get(answers);
    for (int i = 0; i < questions; ++i) {
      if (got[static_cast<std::size_t>(i)] != "3 words, the last '" + std::to_string(i) + "'") ++wrong;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int most = celer::get(g.task(&gateway::most).remote());
    std::cout << questions << " questions answered in " << seconds << " s (a model call alone takes 5 ms); "
              << "at most " << most << " in flight on the gateway's one thread; " << wrong << " wrong\n";
    std::cout << "e.g. " << got.back() << "\n";

    celer::kill(g);
    celer::kill(m);
    celer::shutdown();
    return wrong == 0 && most > 1 ? 0 : 1;
  });
}
