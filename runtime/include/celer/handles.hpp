#pragma once
/// Handles users hold: `object_ref<T>`, a future value in the object store, and
/// `actor_handle<T>`, a remote actor of type T. Both are cheap to copy and may be passed to
/// other tasks and actors as arguments or inside results.
///
///   celer::object_ref<int> r = celer::task(add).remote(1, 2);
///   celer::actor_handle<counter> c = celer::actor(make_counter).remote(0);
///   celer::object_ref<int> n = c.task(&counter::incr).remote(5);

#include <celer/fwd.hpp>
#include <celer/ids.hpp>

#include <memory>

namespace celer {

/// A reference to an object that a task will return or that `put` stored. `celer::get`
/// reads it; passing it to a task resolves it to its value before the task runs (unless the
/// parameter is itself an `object_ref`).
///
/// The object lives while a ref to it does: once the last copy of the ref that `put` or
/// `remote` returned is gone (and no pending task takes it as an argument), it is freed,
/// and its memory and disk space are reused. A ref passed to another process as an
/// `object_ref` parameter or inside a value (serialised) keeps the object until its job
/// ends; so refs rebuilt from their id and owner (deserialised) need not count.
template <class T>
class object_ref {
public:
  using value_type = T;
  object_ref() = default;
  object_ref(object_id id, address owner) : id_(id), owner_(std::move(owner)) {}
  /// A ref sharing `hold` (what keeps the object alive) with another.
  object_ref(object_id id, address owner, std::shared_ptr<const void> hold)
    : id_(id), owner_(std::move(owner)), hold_(std::move(hold)) {}
  /// The object's id.
  [[nodiscard]] const object_id& id() const noexcept { return id_; }
  /// The process that owns (tracks) the object.
  [[nodiscard]] const address& owner() const noexcept { return owner_; }
  [[nodiscard]] bool valid() const noexcept { return !id_.nil(); }
  /// What keeps the object alive (shared by copies of this ref).
  [[nodiscard]] const std::shared_ptr<const void>& hold() const noexcept { return hold_; }
  friend bool operator==(const object_ref& a, const object_ref& b) { return a.id_ == b.id_; }

private:
  object_id id_;
  address owner_;
  std::shared_ptr<const void> hold_;
};

/// A handle to a remote actor of type T. Calls through one handle from one caller run in
/// submission order.
template <class T>
class actor_handle {
public:
  using actor_type = T;
  actor_handle() = default;
  explicit actor_handle(actor_id id) : id_(id) {}
  [[nodiscard]] const actor_id& id() const noexcept { return id_; }
  [[nodiscard]] bool valid() const noexcept { return !id_.nil(); }

  /// Starts a call of `method` (a registered member function of T or of a public base of
  /// T; a virtual one runs T's override): `handle.task(&T::method).remote(args...)`.
  template <class Method>
  [[nodiscard]] actor_call_builder<Method> task(Method method) const;

  friend bool operator==(const actor_handle& a, const actor_handle& b) { return a.id_ == b.id_; }

private:
  actor_id id_;
};

} // namespace celer
