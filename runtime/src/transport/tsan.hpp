#pragma once
// ThreadSanitizer annotations for hand-offs through CAF. Debian's libcaf_core is not built
// with TSan, so TSan cannot see that a mailbox enqueue happens before the dequeue on the
// receiving thread, and reports every message as a race. Senders `release` and receivers
// `acquire` a slot keyed by the receiver's id, which tells TSan what the mailbox
// guarantees. Without TSan these compile to nothing.

#include <celer/ids.hpp>

#include <functional>

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace celer::tsan {

#if defined(__SANITIZE_THREAD__)
inline char* slot(const unique_id& id) {
  static char slots[4096];  // collisions only add ordering; they never hide a hand-off
  return &slots[std::hash<unique_id>{}(id) % sizeof slots];
}
inline void release(const unique_id& receiver) { __tsan_release(slot(receiver)); }
inline void acquire(const unique_id& receiver) { __tsan_acquire(slot(receiver)); }
#else
inline void release(const unique_id&) {}
inline void acquire(const unique_id&) {}
#endif

} // namespace celer::tsan
