#pragma once
/// celer: an actor-model distributed task runtime for machine-learning work.
/// Include this header to get the whole public API.
///
///   #include <celer/celer.hpp>
///   int add(int a, int b) { return a + b; }
///   CELER_REMOTE(add);
///   int main(int argc, char** argv) {
///     celer::init(argc, argv);
///     std::cout << celer::get(celer::task(add).remote(1, 2)) << "\n";   // 3
///     celer::shutdown();
///   }

#include <celer/actor_pool.hpp>
#include <celer/api.hpp>
#include <celer/as_completed.hpp>
#include <celer/bytes.hpp>
#include <celer/codec.hpp>
#include <celer/error.hpp>
#include <celer/fwd.hpp>
#include <celer/future.hpp>
#include <celer/generator.hpp>
#include <celer/handles.hpp>
#include <celer/ids.hpp>
#include <celer/options.hpp>
#include <celer/peer.hpp>
#include <celer/print.hpp>
#include <celer/queue.hpp>
#include <celer/ref_stream.hpp>
#include <celer/remote.hpp>
#include <celer/runtime_context.hpp>
#include <celer/version.hpp>
