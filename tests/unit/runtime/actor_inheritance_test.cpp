// Actors of classes with bases, as a Ray C++ user's tests have them: virtual methods of two
// classes in the same vtable slot (once mixed up by the registry), a base's method called
// on a derived actor (refused before), the derived override running, a second base at an
// offset, a virtual base, and a method of a class the actor does not derive from. Runs
// embedded and against a local cluster.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <numeric>

using namespace celer_test;
using Catch::Matchers::Contains;

namespace {

// Two unrelated classes, each with a virtual name() in the first slot.
struct cat_actor {
  virtual ~cat_actor() = default;
  virtual std::string name() { return "cat"; }
};
struct dog_actor {
  virtual ~dog_actor() = default;
  virtual std::string name() { return "dog"; }
};
cat_actor* make_cat() { return new cat_actor(); }
dog_actor* make_dog() { return new dog_actor(); }

// A base with state, a non-virtual method and a virtual one; a derived class that overrides
// the virtual one and adds a method of its own.
struct shape {
  virtual ~shape() = default;
  int moves = 0;
  int move(int by) { return moves += by; }
  virtual std::string kind() const { return "shape"; }
};
struct square : shape {
  std::string kind() const override { return "square of " + std::to_string(moves); }
  int side() const { return 4; }
};
std::unique_ptr<square> make_square() { return std::make_unique<square>(); }
shape* make_shape() { return new shape(); }

// A second base sits at an offset in the derived object.
struct logger_part {
  virtual ~logger_part() = default;
  std::vector<std::string> lines;
  std::size_t log(std::string line) {
    lines.push_back(std::move(line));
    return lines.size();
  }
};
struct logging_square : square, logger_part {
  std::size_t both() const { return static_cast<std::size_t>(moves) + lines.size(); }
};
std::shared_ptr<logging_square> make_logging_square() { return std::make_shared<logging_square>(); }

// A virtual base, shared by two paths (a diamond).
struct counted {
  int count = 7;
  int read_count() const { return count; }
};
struct left_path : virtual counted {
  int bump_left() { return ++count; }
};
struct right_path : virtual counted {
  int bump_right() { return count += 10; }
};
struct diamond : left_path, right_path {};
diamond* make_diamond() { return new diamond(); }

int total_of(std::vector<int>& v) {
  v.push_back(1000);  // changes the worker's decoded copy only
  return std::accumulate(v.begin(), v.end(), 0);
}

CELER_REMOTE(make_cat, make_dog, &cat_actor::name, &dog_actor::name, make_square, make_shape,
             &shape::move, &shape::kind, &square::side, make_logging_square, &logger_part::log,
             &logging_square::both, make_diamond, &counted::read_count, &left_path::bump_left,
             &right_path::bump_right, total_of);

} // namespace

TEST_CASE("two actor classes' virtual methods in the same vtable slot each run their own",
          "[actor][registry]") {
  scoped_runtime rt;
  auto cat = celer::actor(make_cat).remote();
  auto dog = celer::actor(make_dog).remote();
  CHECK(celer::get(cat.task(&cat_actor::name).remote()) == "cat");
  CHECK(celer::get(dog.task(&dog_actor::name).remote()) == "dog");
}

TEST_CASE("a base class's methods run on a derived actor, virtual ones as overridden",
          "[actor][registry]") {
  scoped_runtime rt;
  auto sq = celer::actor(make_square).remote();
  // &shape::move, and &square::move which names the same inherited member.
  CHECK(celer::get(sq.task(&shape::move).remote(2)) == 2);
  CHECK(celer::get(sq.task(&square::move).remote(3)) == 5);
  CHECK(celer::get(sq.task(&square::side).remote()) == 4);
  // Through the base's pointer, the override runs, on the same object.
  CHECK(celer::get(sq.task(&shape::kind).remote()) == "square of 5");
  // On an actor of the base class itself, the base's own version runs.
  auto plain = celer::actor(make_shape).remote();
  CHECK(celer::get(plain.task(&shape::kind).remote()) == "shape");
}

TEST_CASE("methods of a base at an offset run on the right part of the actor", "[actor][registry]") {
  scoped_runtime rt;
  for (int concurrency : {1, 2}) {  // on the worker's thread, and on its call pool
    auto a = celer::actor(make_logging_square).options({.max_concurrency = concurrency}).remote();
    CHECK(celer::get(a.task(&logger_part::log).remote(std::string("one"))) == 1u);
    CHECK(celer::get(a.task(&logger_part::log).remote(std::string("two"))) == 2u);
    CHECK(celer::get(a.task(&shape::move).remote(4)) == 4);
    // Both bases changed the one object the derived class sees.
    CHECK(celer::get(a.task(&logging_square::both).remote()) == 6u);
    CHECK(celer::get(a.task(&shape::kind).remote()) == "square of 4");
  }
}

TEST_CASE("methods of a virtual base run on the one shared base", "[actor][registry]") {
  scoped_runtime rt;
  auto d = celer::actor(make_diamond).remote();
  CHECK(celer::get(d.task(&left_path::bump_left).remote()) == 8);
  CHECK(celer::get(d.task(&right_path::bump_right).remote()) == 18);
  CHECK(celer::get(d.task(&counted::read_count).remote()) == 18);
}

TEST_CASE("a method of a class the actor does not derive from fails clearly", "[actor][registry]") {
  scoped_runtime rt;
  auto cat = celer::actor(make_cat).remote();
  CHECK(celer::get(cat.task(&cat_actor::name).remote()) == "cat");
  // The typed API refuses this at compile time; a name on the wire can still ask for it.
  const auto* method = celer::detail::find_remote("dog_actor::name");
  REQUIRE(method != nullptr);
  auto r = celer::detail::restore<std::string>(celer::detail::submit_actor_call(cat.id(), *method, {}, {}));
  try {
    (void)celer::get(r);
    FAIL("a dog's method ran on a cat");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::not_found);
    CHECK_THAT(e.what(), Contains("dog_actor::name") && Contains("not a public base") &&
                           Contains("cat_actor"));
  }
  CHECK(celer::get(cat.task(&cat_actor::name).remote()) == "cat");  // still serving
}

TEST_CASE("a remote function may take a non-const lvalue reference; changes stay remote",
          "[registry]") {
  scoped_runtime rt;
  std::vector<int> v{1, 2, 3};
  CHECK(celer::get(celer::task(total_of).remote(v)) == 1006);
  CHECK(v == std::vector<int>{1, 2, 3});  // not sent back, as in Ray
}
