// The methods every message travels with, read and written where they lie: basic.publish and the settlements a
// client sends (basic.ack, basic.nack, basic.reject) are read straight from a frame's payload with no Method,
// and basic.deliver and a confirm (basic.ack) are written straight onto the end of a write buffer. These are
// the hot path's shortcuts through the generic codec (methods.h), for the same methods and the same bytes:
// amqp_codec_test checks each against it. Any other method, and any payload these do not read, goes through
// the generic codec, which also says what is wrong with a bad one.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "protocol/amqp/methods.h"

namespace firemq::amqp {

// The class and method ids at the start of a method frame's payload ({0, 0} when it is shorter than that).
MethodId method_id_of(ByteView payload);

// basic.publish's fields, borrowed from the payload.
struct BasicPublishFields {
  std::string_view exchange;
  std::string_view routing_key;
  bool mandatory = false;
  bool immediate = false;
};
// nullopt: the payload is not a well-formed basic.publish.
std::optional<BasicPublishFields> read_basic_publish(ByteView payload);

// basic.ack (delivery_tag, multiple), basic.nack (delivery_tag, multiple, requeue) or basic.reject
// (delivery_tag, requeue): the fields a method lacks are false.
struct BasicSettleFields {
  MethodId method;
  std::uint64_t delivery_tag = 0;
  bool multiple = false;
  bool requeue = false;
};
// nullopt: the payload is not a well-formed basic.ack, basic.nack or basic.reject.
std::optional<BasicSettleFields> read_basic_settle(ByteView payload);

// basic.deliver on `channel` as a whole method frame, appended to `out`; its content follows (append_content).
void append_basic_deliver(Bytes& out, std::uint16_t channel, std::string_view consumer_tag, std::uint64_t delivery_tag,
                          bool redelivered, std::string_view exchange, std::string_view routing_key);
// A publisher confirm: basic.ack on `channel` as a whole method frame, appended to `out`.
void append_basic_ack(Bytes& out, std::uint16_t channel, std::uint64_t delivery_tag, bool multiple);

}  // namespace firemq::amqp
