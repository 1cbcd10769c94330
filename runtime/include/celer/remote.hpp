#pragma once
/// Registering remote functions, actor factories and actor methods by name.
///
///   int add(int a, int b) { return a + b; }
///   struct counter { int incr(int by); ... };
///   counter* make_counter(int start) { return new counter{start}; }
///   CELER_REMOTE(add, make_counter, &counter::incr);
///
/// `CELER_REMOTE` records each entry under its spelling ("add", "make_counter",
/// "counter::incr") at static initialisation. A task names its function by that name on the
/// wire, so every process running the same binary can execute it. A factory is a free
/// function returning `T*`, `std::unique_ptr<T>` or `std::shared_ptr<T>`.
///
/// Registering the same function again under the same name (a CELER_REMOTE in a header
/// that several files include) changes nothing. Two different functions under one name
/// (`a::f` and `b::f` both registered as "f") make `celer::init` throw invalid_argument
/// naming it. Methods of a base class, virtual or not, register once (`&base::m`) and may
/// be called on actors of derived classes; a virtual one runs the actor's override.
/// A parameter taken by non-const lvalue reference (`void f(std::vector<int>& v)`) gets
/// the decoded copy of the argument: what the function changes in it is not sent back.

#include <celer/detail/registry.hpp>

#define CELER_DETAIL_CAT2(a, b) a##b
#define CELER_DETAIL_CAT(a, b) CELER_DETAIL_CAT2(a, b)

/// Registers free functions, actor factories and member functions by name:
/// `CELER_REMOTE(add, make_counter, &counter::incr);` at namespace scope.
#define CELER_REMOTE(...)                                                                   \
  static const ::celer::detail::registrar CELER_DETAIL_CAT(celer_remote_registrar_,        \
                                                           __COUNTER__) {                   \
    #__VA_ARGS__, __VA_ARGS__                                                               \
  }
