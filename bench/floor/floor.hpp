#pragma once
// The floor under celer's figures on this machine: what a bare ZeroMQ request/reply round
// trip costs (between two threads, and between two processes) and how fast memcpy copies.
// No synchronous call can beat the round trip; no put can beat memcpy.

#include <string>

namespace celer::bench {

/// Round trips per second of a 2-byte ZeroMQ REQ/REP exchange over TCP loopback between
/// two threads of this process, for about `seconds`.
double zmq_roundtrips_threads(double seconds);
/// The same between this process and a forked child.
double zmq_roundtrips_processes(double seconds);
/// GB/s of memcpy of `bytes`-byte buffers (the size of single_client_put_gigabytes' value).
double memcpy_gigabytes(double seconds, std::size_t bytes);
/// GB/s of writing `bytes` to a new file in `dir` and closing it (no fsync: what the page
/// cache and the disk take, like a spill), for about `seconds`.
double file_write_gigabytes(double seconds, std::size_t bytes, const std::string& dir);
/// GB/s of writing `count` new files of `bytes` each in `dir`, all kept until the last is
/// closed, then removed (no fsync), with a spill's system calls: `fallocate` of the whole
/// file, then 1 MiB `write()`s. What a spill of that many objects must do: each file takes
/// fresh page-cache pages, where the loop above reuses the pages its last, deleted, file
/// gave back. Measured once.
double file_write_kept_gigabytes(std::size_t bytes, std::size_t count, const std::string& dir);

} // namespace celer::bench
