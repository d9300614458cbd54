// The bounds on what a client attaches to what the broker keeps. One size bound on the arguments: a queue's, an
// exchange's, a binding's and a consumer's (issue 27). The wire lets a declare carry up to --max-frame (16 MiB) and its
// arguments then live as long as the queue, are written to definitions.json and shown by the API, so one client
// could hold gigabytes with a few thousand declares. It is checked where every protocol's request meets the
// broker (Vhost for topology, Session for subscribe), so FireMQ, AMQP 0-9-1, the management API and definitions
// imports are held to it alike. A reference-broker limit, not a spec rule: RabbitMQ's bound is its frame_max
// (128 KiB by default), which the whole method must fit in.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "protocol/error.h"
#include "protocol/value.h"

namespace firemq {

// The arguments' MessagePack encoding, as the wire carries them; the same as the pre-welcome frame bound.
inline constexpr std::size_t kMaxArgumentsBytes = 64 * 1024;

// 506 resource-error naming what the arguments are for ("queue 'q' in vhost '/'") when their encoding is longer
// than kMaxArgumentsBytes; 502 syntax-error when a str among them (a key or a value, at any depth) is not UTF-8.
Status check_arguments(const Map& args, const std::string& owner);

// 502 syntax-error when a name or key that the broker keeps is not UTF-8: "queue name", "binding key".
//
// The reference decoder takes a str that is not UTF-8 (docs/spec-notes.md, "Strings that are not UTF-8"), and a
// publish's routing key may be any bytes. But what the broker keeps is shown as JSON by the management API and,
// when durable, written to definitions.json, whose JSON holds only text: a declare that saved such a name once
// threw out of the save and left its connection unanswered. MessagePack's str is UTF-8 text, so 502 ("a field has
// the wrong type"), on every protocol alike.
Status check_text(std::string_view what, const std::string& text);

}  // namespace firemq
