// CELER_REMOTE's registry: names, kinds, invokers and their argument checks; lookup by
// pointer that tells classes apart, methods of base classes on derived actors, the same
// function registered twice, two functions under one name (reported by init), and
// parameters taken by non-const lvalue reference.
#include "remote_registry.hpp"
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <numeric>

using namespace celer;
using namespace celer_test;
using Catch::Matchers::Contains;

namespace {

// Two unrelated classes whose virtual ping() sit in the same vtable slot: their
// member-function pointers have the same bytes.
struct pinger_a {
  virtual ~pinger_a() = default;
  virtual int ping() { return 1; }
};
struct pinger_b {
  virtual ~pinger_b() = default;
  virtual int ping() { return 2; }
};

// A class whose second base sits at an offset: calling that base's methods needs the
// instance's pointer adjusted, and its virtual method resolves to the override.
struct left_part {
  virtual ~left_part() = default;
  int left = 10;
  int left_value() const { return left; }
};
struct right_part {
  virtual ~right_part() = default;
  int right = 20;
  int right_value() const { return right; }
  virtual int describe() { return right; }
};
struct both_parts : left_part, right_part {
  int describe() override { return left + right; }
};
both_parts* make_both_parts() { return new both_parts(); }
struct unrelated_part {
  int nothing() { return 0; }
};

int sum_in_place(std::vector<int>& v) {
  v.push_back(100);  // changes the decoded copy only
  return std::accumulate(v.begin(), v.end(), 0);
}

CELER_REMOTE(&pinger_a::ping, &pinger_b::ping, make_both_parts, &left_part::left_value,
             &right_part::right_value, &right_part::describe, &unrelated_part::nothing,
             sum_in_place);

int first_clash() { return 1; }
int second_clash() { return 2; }

} // namespace

TEST_CASE("CELER_REMOTE's spelling splits into names", "[registry]") {
  auto names = detail::split_remote_names("add, make_counter,  &counter::incr, f<int, 2>");
  REQUIRE(names == std::vector<std::string>{"add", "make_counter", "counter::incr", "f<int, 2>"});
}

TEST_CASE("functions, factories and methods register under their names", "[registry]") {
  const auto* add_entry = detail::find_remote("add");
  REQUIRE(add_entry != nullptr);
  REQUIRE(add_entry->kind == detail::remote_kind::function);
  REQUIRE(add_entry->arity == 2);
  REQUIRE(detail::find_remote(detail::key_of(&add)) == add_entry);

  const auto* factory = detail::find_remote("make_counter");
  REQUIRE(factory != nullptr);
  REQUIRE(factory->kind == detail::remote_kind::factory);

  const auto* method = detail::find_remote("counter::incr");
  REQUIRE(method != nullptr);
  REQUIRE(method->kind == detail::remote_kind::method);
  REQUIRE(method->class_type == factory->class_type);
  REQUIRE(detail::find_remote(detail::key_of(&counter::incr)) == method);
  REQUIRE(detail::find_remote("nobody") == nullptr);
}

TEST_CASE("an invoker decodes arguments, calls, and encodes the result", "[registry]") {
  const auto* e = detail::find_remote("add");
  auto out = e->call(*e, nullptr, {detail::pack(2), detail::pack(40)});
  REQUIRE(detail::unpack<int>(out, "result") == 42);
}

TEST_CASE("an invoker rejects a wrong count or type of arguments", "[registry]") {
  const auto* e = detail::find_remote("add");
  REQUIRE_THROWS_AS(e->call(*e, nullptr, {detail::pack(2)}), detail::argument_error);
  REQUIRE_THROWS_AS(e->call(*e, nullptr, {detail::pack(2), detail::pack("x")}),
                    detail::argument_error);
  REQUIRE_THROWS_AS(e->call(*e, nullptr, {detail::pack(2), std::string("\xc1")}),
                    detail::argument_error);
}

TEST_CASE("a factory makes an instance its methods run on", "[registry]") {
  const auto* make = detail::find_remote("make_counter");
  auto instance = make->make(*make, {detail::pack(5)});
  const auto* incr = detail::find_remote("counter::incr");
  auto out = incr->call(*incr, instance.get(), {detail::pack(3)});
  REQUIRE(detail::unpack<int>(out, "result") == 8);
}

TEST_CASE("two classes' virtual methods in one vtable slot are told apart by their pointers",
          "[registry]") {
  // The bytes alone collide (this was the bug: whichever registered last won).
  REQUIRE(detail::target_of(&pinger_a::ping) == detail::target_of(&pinger_b::ping));
  const auto* a = detail::find_remote(detail::key_of(&pinger_a::ping));
  const auto* b = detail::find_remote(detail::key_of(&pinger_b::ping));
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a->name == "pinger_a::ping");
  CHECK(b->name == "pinger_b::ping");
  pinger_a pa;
  pinger_b pb;
  CHECK(detail::unpack<int>(a->call(*a, &pa, {}), "result") == 1);
  CHECK(detail::unpack<int>(b->call(*b, &pb, {}), "result") == 2);
}

TEST_CASE("a base class's method finds its part of a derived instance, at its offset",
          "[registry]") {
  const auto* make = detail::find_remote("make_both_parts");
  REQUIRE(make != nullptr);
  auto instance = make->make(*make, {});
  const auto* left = detail::find_remote(detail::key_of(&left_part::left_value));
  const auto* right = detail::find_remote(detail::key_of(&right_part::right_value));
  const auto* describe = detail::find_remote(detail::key_of(&right_part::describe));
  const auto* unrelated = detail::find_remote(detail::key_of(&unrelated_part::nothing));
  REQUIRE((left && right && describe && unrelated));

  void* as_right = right->as_class(*make, instance.get());
  // The right_part of a both_parts is not at its start: the pointer moved.
  auto* whole = static_cast<both_parts*>(instance.get());
  CHECK(as_right == static_cast<right_part*>(whole));
  CHECK(as_right != instance.get());
  CHECK(left->as_class(*make, instance.get()) == static_cast<left_part*>(whole));
  CHECK(detail::unpack<int>(right->call(*right, as_right, {}), "result") == 20);
  CHECK(detail::unpack<int>(left->call(*left, left->as_class(*make, instance.get()), {}),
                            "result") == 10);
  // A virtual method of the base runs the derived override.
  CHECK(detail::unpack<int>(describe->call(*describe, describe->as_class(*make, instance.get()), {}),
                            "result") == 30);
  // A class the actor does not derive from is no base of it.
  CHECK(unrelated->as_class(*make, instance.get()) == nullptr);
}

TEST_CASE("the same function registered twice under one name is one entry", "[registry]") {
  remote_registry r;
  r.add(detail::make_entry("first_clash", &first_clash));
  r.add(detail::make_entry("first_clash", &first_clash));  // a header included twice
  const auto* e = r.find("first_clash");
  REQUIRE(e != nullptr);
  CHECK(r.find(detail::key_of(&first_clash)) == e);
  CHECK(r.check().has_value());
}

TEST_CASE("two functions under one name are reported, not run and not an abort", "[registry]") {
  remote_registry r;
  r.add(detail::make_entry("clash", &first_clash));
  r.add(detail::make_entry("clash", &second_clash));
  // The first stays; nothing ever runs the second under that name.
  REQUIRE(r.find("clash") != nullptr);
  CHECK(r.find(detail::key_of(&first_clash)) == r.find("clash"));
  CHECK(r.find(detail::key_of(&second_clash)) == nullptr);
  auto checked = r.check();
  REQUIRE_FALSE(checked.has_value());
  CHECK(checked.error().code() == error_code::invalid_argument);
  CHECK_THAT(checked.error().message(), Contains("'clash'") && Contains("int (*)()"));
  r.forget("clash");
  CHECK(r.check().has_value());
  CHECK(r.find("clash") == nullptr);
}

TEST_CASE("celer::init refuses a binary that gives one name to two functions", "[registry]") {
  auto& global = global_remote_registry();
  global.add(detail::make_entry("celer_test_clash", &first_clash));
  global.add(detail::make_entry("celer_test_clash", &second_clash));
  struct forget_after {
    ~forget_after() { global_remote_registry().forget("celer_test_clash"); }
  } forget;
  try {
    celer::init({.num_cpus = 1});
    celer::shutdown();
    FAIL("init accepted the clash");
  } catch (const celer::exception& e) {
    CHECK(e.code() == error_code::invalid_argument);
    CHECK_THAT(e.what(), Contains("celer_test_clash"));
  }
  CHECK_FALSE(celer::is_initialized());
}

TEST_CASE("a parameter taken by non-const lvalue reference gets the decoded copy", "[registry]") {
  const auto* e = detail::find_remote("sum_in_place");
  REQUIRE(e != nullptr);
  CHECK(e->arity == 1);
  auto out = e->call(*e, nullptr, {detail::pack(std::vector<int>{1, 2, 3})});
  CHECK(detail::unpack<int>(out, "result") == 106);
}
