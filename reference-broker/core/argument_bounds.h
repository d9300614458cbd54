// The one size bound on the arguments a client attaches to what the broker keeps: a queue's, an exchange's, a
// binding's and a consumer's (issue 27). The wire lets a declare carry up to --max-frame (16 MiB) and its
// arguments then live as long as the queue, are written to definitions.json and shown by the API, so one client
// could hold gigabytes with a few thousand declares. It is checked where every protocol's request meets the
// broker (Vhost for topology, Session for subscribe), so FireMQ, AMQP 0-9-1, the management API and definitions
// imports are held to it alike. A reference-broker limit, not a spec rule: RabbitMQ's bound is its frame_max
// (128 KiB by default), which the whole method must fit in.
#pragma once

#include <cstddef>
#include <string>

#include "protocol/error.h"
#include "protocol/value.h"

namespace firemq {

// The arguments' MessagePack encoding, as the wire carries them; the same as the pre-welcome frame bound.
inline constexpr std::size_t kMaxArgumentsBytes = 64 * 1024;

// 506 resource-error naming what the arguments are for ("queue 'q' in vhost '/'") when their encoding is longer
// than kMaxArgumentsBytes.
Status check_arguments_size(const Map& args, const std::string& owner);

}  // namespace firemq
