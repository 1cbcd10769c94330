#pragma once
// A job's entrypoint as an argument vector. celer never runs one through a shell: a Ray
// user's `"entrypoint": "python train.py --lr 0.1"` is split into words as a shell would
// split them (quotes and backslashes), and anything a shell would *do* (pipes, redirection,
// `;`, `&&`, `$VAR`, backticks, globs left to expand) is refused with a message that says how
// to ask for a shell explicitly, as the job's own program: `sh -c '...'`.
//
//   auto argv = jobs::split_entrypoint(R"(python3 train.py --name "my run")");
//   // {"python3", "train.py", "--name", "my run"}

#include <celer/error.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace celer::jobs {

/// The words of `text`. invalid_argument for an empty entrypoint, an unclosed quote, or a
/// shell operator outside quotes (the message names it).
[[nodiscard]] expected<std::vector<std::string>> split_entrypoint(std::string_view text);

/// The argument vector written back as one line a person can read (and split_entrypoint
/// reads back to the same words): words quoted where they need it.
[[nodiscard]] std::string join_entrypoint(const std::vector<std::string>& argv);

} // namespace celer::jobs
