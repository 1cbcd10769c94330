#include "writer_actor.hpp"

#include <celer/remote.hpp>

namespace celer::checkpoint::detail {

writer_actor* make_writer_actor(writer_config config) { return new writer_actor(std::move(config)); }

} // namespace celer::checkpoint::detail

// Registered under their full names, so that they never clash with a user's functions.
CELER_REMOTE(celer::checkpoint::detail::make_writer_actor,
             &celer::checkpoint::detail::writer_actor::probe,
             &celer::checkpoint::detail::writer_actor::add_segment,
             &celer::checkpoint::detail::writer_actor::commit,
             &celer::checkpoint::detail::writer_actor::close);
