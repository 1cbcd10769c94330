#pragma once
// A fatal signal leaves a trace in the process's log: SIGSEGV, SIGBUS, SIGFPE, SIGILL and
// SIGABRT write the signal's name, the pid and a backtrace to the log descriptor, then the
// signal takes its course (the handler that was there before, else the default action), so
// the process still dies by it and its exit status says so.
//
//   install_crash_handler();          // once per process, early; logs to standard error
//
// Heads, node agents and workers log to their file in the session directory through
// standard error (celer start and the node's process launcher point it there); a driver's
// standard error is its own.

#include <unistd.h>

namespace celer {

/// Installs the handler for the fatal signals (again where something replaced it since; a
/// later call also changes `log_fd`). Thread-safe. The handler itself uses async-signal-safe
/// calls only, on an alternate stack for the first installing thread (so a stack overflow
/// there is reported too).
void install_crash_handler(int log_fd = STDERR_FILENO);

} // namespace celer
