#pragma once
// A call with several returns (a remote function returning std::tuple<A, B, ...>) packs
// one msgpack array; each of its values becomes its own object. This cuts the array into
// the packed bytes of each value, copying each once and decoding nothing.
//
//   auto values = split_returns(packed, 3);   // three msgpack values, or throws

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace celer {

/// The packed values of the msgpack array `packed`, which must hold exactly `count` of
/// them. Throws detail::argument_error (invalid_argument) naming what it found otherwise: the
/// call then fails as an invalid call, never retried.
std::vector<std::string> split_returns(std::string_view packed, std::uint32_t count);

} // namespace celer
