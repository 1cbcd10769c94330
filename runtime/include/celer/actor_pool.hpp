#pragma once
/// `celer::actor_pool<T>`: work spread over a fixed set of actors, one call per actor at a
/// time, each actor taking the next piece as soon as its call returns (Ray's ActorPool).
///
///   std::vector<celer::actor_handle<scorer>> actors;
///   for (int i = 0; i < 4; ++i) actors.push_back(celer::actor(make_scorer).remote());
///   celer::actor_pool pool(actors);
///   std::vector<double> scores = pool.map(&scorer::score, inputs);        // in input order
///   for (double s : pool.map_unordered(&scorer::score, inputs)) ...        // as they finish
///   pool.submit([](const celer::actor_handle<scorer>& a, const item& x) {
///     return a.task(&scorer::score).remote(x);
///   }, first);
///   while (pool.has_next()) use(pool.get_next<double>());

#include <celer/api.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace celer {

/// A pool of actors of type T that runs submitted calls on whichever actor is idle, queueing
/// them while all are busy. A submission is a member function of T (`&T::method`, called
/// with the value) or a callable `(const actor_handle<T>&, const V&) -> object_ref<R>` that
/// makes the call itself. Results come back in submission order (`get_next`) or as they
/// finish (`get_next_unordered`); an actor is reused once its result has been taken. A
/// call that fails throws from the `get_next` that returns it, and its actor goes back to
/// the pool. Not for use from several threads at once.
template <class T>
class actor_pool {
public:
  /// Throws celer::exception (invalid_argument) for no actors or an empty handle.
  explicit actor_pool(std::vector<actor_handle<T>> actors) {
    if (actors.empty()) throw exception(error_code::invalid_argument, "celer::actor_pool needs at least one actor");
    for (auto& a : actors) push(std::move(a));
  }

  /// Runs `fn` with `value` on an idle actor, or queues it until one is idle.
  template <class F, class V>
  void submit(F fn, V&& value) {
    auto start = [fn, value = std::decay_t<V>(std::forward<V>(value))](const actor_handle<T>& a) {
      auto ref = call(fn, a, value);
      return object_ref<void>(ref.id(), ref.owner(), ref.hold());
    };
    if (idle_.empty()) {
      waiting_.push_back(std::move(start));
      return;
    }
    auto actor = std::move(idle_.front());
    idle_.pop_front();
    dispatch(std::move(actor), start);
  }

  /// Whether a result is still to be taken (running or queued).
  [[nodiscard]] bool has_next() const noexcept { return !running_.empty() || !waiting_.empty(); }

  /// The earliest submitted result not taken yet, as an R; waits for it (up to `timeout`: then
  /// get_timeout_error, and the result stays next). Throws the call's error if it failed,
  /// and failed_precondition when there is no result to take.
  template <class R>
  R get_next(timeout_t timeout = {}) {
    check_next();
    // Calls start in submission order, so the earliest not taken has started.
    auto it = running_.begin();
    auto got = celer::wait(std::vector<object_ref<void>>{it->second.ref}, 1, timeout);
    if (got.ready.empty()) throw get_timeout_error("celer::actor_pool::get_next: the timeout passed");
    return take<R>(it);
  }

  /// Whichever result is ready first, as an R; waits up to `timeout` (then
  /// get_timeout_error). Throws the call's error if it failed, and failed_precondition when
  /// there is no result to take.
  template <class R>
  R get_next_unordered(timeout_t timeout = {}) {
    check_next();
    std::vector<object_ref<void>> refs;
    refs.reserve(running_.size());
    for (const auto& [index, r] : running_) refs.push_back(r.ref);
    auto got = celer::wait(refs, 1, timeout);
    if (got.ready.empty()) throw get_timeout_error("celer::actor_pool::get_next_unordered: the timeout passed");
    for (auto it = running_.begin(); it != running_.end(); ++it) {
      if (it->second.ref == got.ready.front()) return take<R>(it);
    }
    throw exception(error_code::internal, "celer::actor_pool: a ready result is not one of its calls");
  }

  /// Runs `fn` on every value and returns the results in the order of `values`. Throws the
  /// first failed call's error (the calls after it stay in the pool: take them with
  /// get_next, or leave them).
  template <class F, class V>
  auto map(F fn, const std::vector<V>& values) {
    using R = result_of<F, V>;
    static_assert(!std::is_void_v<R>, "celer::actor_pool::map needs calls that return a value");
    for (const auto& v : values) submit(fn, v);
    std::vector<R> out;
    out.reserve(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) out.push_back(get_next<R>());
    return out;
  }

  /// Like `map`, with the results in the order the calls finish.
  template <class F, class V>
  auto map_unordered(F fn, const std::vector<V>& values) {
    using R = result_of<F, V>;
    static_assert(!std::is_void_v<R>, "celer::actor_pool::map_unordered needs calls that return a value");
    for (const auto& v : values) submit(fn, v);
    std::vector<R> out;
    out.reserve(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) out.push_back(get_next_unordered<R>());
    return out;
  }

  /// Whether an actor is idle.
  [[nodiscard]] bool has_free() const noexcept { return !idle_.empty() && waiting_.empty(); }
  /// Adds an actor (it takes a queued submission at once, if any).
  void push(actor_handle<T> actor) {
    if (!actor.valid()) throw exception(error_code::invalid_argument, "celer::actor_pool: an empty actor handle");
    idle_.push_back(std::move(actor));
    start_waiting();
  }
  /// Removes an idle actor and returns it; throws failed_precondition when none is idle.
  actor_handle<T> pop_idle() {
    if (idle_.empty()) throw exception(error_code::failed_precondition, "celer::actor_pool: no actor is idle");
    auto a = std::move(idle_.back());
    idle_.pop_back();
    return a;
  }

private:
  struct call_state {
    object_ref<void> ref;
    actor_handle<T> actor;
  };
  using starter = std::function<object_ref<void>(const actor_handle<T>&)>;

  template <class F, class V>
  static auto call(F fn, const actor_handle<T>& a, const V& value) {
    if constexpr (std::is_member_function_pointer_v<F>) {
      return a.task(fn).remote(value);
    } else {
      return fn(a, value);
    }
  }
  template <class F, class V>
  using result_of =
    typename decltype(call(std::declval<F>(), std::declval<const actor_handle<T>&>(), std::declval<const V&>()))::value_type;

  void check_next() const {
    if (!has_next()) throw exception(error_code::failed_precondition, "celer::actor_pool: no more results");
    if (running_.empty()) {
      throw exception(error_code::failed_precondition,
                      "celer::actor_pool: calls wait for an actor, and the pool has none (pop_idle took them)");
    }
  }
  void dispatch(actor_handle<T> actor, const starter& start) {
    auto ref = start(actor);
    running_.emplace(next_index_++, call_state{std::move(ref), std::move(actor)});
  }
  /// Queued submissions take the idle actors.
  void start_waiting() {
    while (!idle_.empty() && !waiting_.empty()) {
      auto actor = std::move(idle_.front());
      idle_.pop_front();
      auto start = std::move(waiting_.front());
      waiting_.pop_front();
      dispatch(std::move(actor), start);
    }
  }
  /// The result of the finished call at `it`: its actor goes back first, so that a failed
  /// call's error leaves the pool whole.
  template <class R>
  R take(typename std::map<std::size_t, call_state>::iterator it) {
    object_ref<R> ref(it->second.ref.id(), it->second.ref.owner(), it->second.ref.hold());
    idle_.push_back(std::move(it->second.actor));
    running_.erase(it);
    start_waiting();
    return celer::get(ref);
  }

  std::deque<actor_handle<T>> idle_;
  std::deque<starter> waiting_;
  /// Calls started and not taken, by submission index.
  std::map<std::size_t, call_state> running_;
  std::size_t next_index_ = 0;
};

template <class T>
actor_pool(std::vector<actor_handle<T>>) -> actor_pool<T>;

} // namespace celer
