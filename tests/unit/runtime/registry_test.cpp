// CELER_REMOTE's registry: names, kinds, invokers and their argument checks.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using namespace celer_test;

TEST_CASE("CELER_REMOTE's spelling splits into names", "[registry]") {
  auto names = detail::split_remote_names("add, make_counter,  &counter::incr, f<int, 2>");
  REQUIRE(names == std::vector<std::string>{"add", "make_counter", "counter::incr", "f<int, 2>"});
}

TEST_CASE("functions, factories and methods register under their names", "[registry]") {
  const auto* add_entry = detail::find_remote("add");
  REQUIRE(add_entry != nullptr);
  REQUIRE(add_entry->kind == detail::remote_kind::function);
  REQUIRE(add_entry->arity == 2);
  REQUIRE(detail::find_remote(detail::target_of(&add)) == add_entry);

  const auto* factory = detail::find_remote("make_counter");
  REQUIRE(factory != nullptr);
  REQUIRE(factory->kind == detail::remote_kind::factory);

  const auto* method = detail::find_remote("counter::incr");
  REQUIRE(method != nullptr);
  REQUIRE(method->kind == detail::remote_kind::method);
  REQUIRE(method->class_type == factory->class_type);
  REQUIRE(detail::find_remote(detail::target_of(&counter::incr)) == method);
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
