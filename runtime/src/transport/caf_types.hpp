#pragma once
// Lets protocol messages travel as CAF messages inside one process. They are never
// serialised by CAF (cluster mode encodes them with msgpack), hence "unsafe" for CAF.

#include "protocol/messages.hpp"

#include <caf/allowed_unsafe_message_type.hpp>

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(celer::protocol::message)
