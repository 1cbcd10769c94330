#pragma once
/// How values travel: arguments and results are msgpack. Any type msgpack can serialise
/// works — numbers, strings, vectors, maps, and your own structs with `MSGPACK_DEFINE` —
/// plus `celer::bytes` and `celer::array<T>` for bulk data (<celer/bytes.hpp>). A std::vector
/// of numbers travels as its raw bytes, like celer::array, so it moves at memory speed
/// wherever it is, inside a struct too.
///
///   struct sample { std::string label; std::vector<float> x; MSGPACK_DEFINE(label, x); };
///   celer::object_ref<sample> r = celer::put(sample{"cat", {0.1f, 0.2f}});
///
/// msgpack is a public dependency on purpose: it is the documented value format of the API
/// (users write MSGPACK_DEFINE, and celer::put / celer::get pack and unpack the user's own
/// types in the user's translation unit). This header is the one way in: it brings
/// <msgpack.hpp> and celer's adaptors for its own types (ids, refs, handles, bytes, arrays;
/// in <celer/detail/codec.hpp>). What it costs a translation unit to compile, and why it
/// stays, is measured in docs/api.md ("msgpack"). ZeroMQ, CAF and RocksDB never appear in
/// public headers.

#include <celer/bytes.hpp>
#include <celer/detail/codec.hpp>
