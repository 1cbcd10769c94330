#pragma once
// Node label selectors as users write them ("zone=a", "kind!=spot", "zone=a|b", "ssd",
// "!spot") and whether a node's labels satisfy them.

#include "protocol/placement.hpp"

#include <celer/error.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace celer::scheduling {

/// Parses one selector; invalid_argument naming it when malformed (empty key, empty value,
/// characters outside [A-Za-z0-9._/-] in a key).
[[nodiscard]] expected<protocol::label_selector> parse_label_selector(std::string_view text);

/// Parses every selector of a request; the first malformed one is the error.
[[nodiscard]] expected<std::vector<protocol::label_selector>> parse_label_selectors(
  const std::vector<std::string>& texts);

/// Whether `labels` satisfy every selector.
[[nodiscard]] bool labels_match(const std::map<std::string, std::string>& labels,
                                const std::vector<protocol::label_selector>& selectors);

/// The selector as users write it, for messages: "kind!=spot".
[[nodiscard]] std::string to_string(const protocol::label_selector& s);

} // namespace celer::scheduling
