#include "protocol/amqp/message_methods.h"

#include "protocol/amqp/frame.h"
#include "protocol/amqp/wire.h"

namespace firemq::amqp {

MethodId method_id_of(ByteView payload) {
  WireReader in(payload);
  const MethodId id{in.u16(), in.u16()};
  return in.failed() ? MethodId{} : id;
}

std::optional<BasicPublishFields> read_basic_publish(ByteView payload) {
  WireReader in(payload);
  if (MethodId{in.u16(), in.u16()} != method::kBasicPublish) return std::nullopt;
  in.u16();  // reserved-1 (the deprecated ticket)
  BasicPublishFields f;
  f.exchange = in.shortstr_view();
  f.routing_key = in.shortstr_view();
  const std::uint8_t bits = in.u8();  // mandatory, immediate: lowest bit first (the spec's 4.2.5.2)
  f.mandatory = (bits & 1) != 0;
  f.immediate = (bits & 2) != 0;
  if (in.failed() || !in.at_end()) return std::nullopt;
  return f;
}

std::optional<BasicSettleFields> read_basic_settle(ByteView payload) {
  WireReader in(payload);
  BasicSettleFields f;
  f.method = MethodId{in.u16(), in.u16()};
  f.delivery_tag = in.u64();
  const std::uint8_t bits = in.u8();
  if (in.failed() || !in.at_end()) return std::nullopt;
  if (f.method == method::kBasicAck) {
    f.multiple = (bits & 1) != 0;
  } else if (f.method == method::kBasicNack) {
    f.multiple = (bits & 1) != 0;
    f.requeue = (bits & 2) != 0;
  } else if (f.method == method::kBasicReject) {
    f.requeue = (bits & 1) != 0;
  } else {
    return std::nullopt;
  }
  return f;
}

void append_basic_deliver(Bytes& out, std::uint16_t channel, std::string_view consumer_tag, std::uint64_t delivery_tag,
                          bool redelivered, std::string_view exchange, std::string_view routing_key) {
  const std::size_t at = begin_frame(out, FrameType::method, channel);
  WireWriter w(out);
  w.u16(method::kBasicDeliver.class_id);
  w.u16(method::kBasicDeliver.method_id);
  w.shortstr(consumer_tag);
  w.u64(delivery_tag);
  w.u8(redelivered ? 1 : 0);
  w.shortstr(exchange);
  w.shortstr(routing_key);
  end_frame(out, at);
}

void append_basic_ack(Bytes& out, std::uint16_t channel, std::uint64_t delivery_tag, bool multiple) {
  const std::size_t at = begin_frame(out, FrameType::method, channel);
  WireWriter w(out);
  w.u16(method::kBasicAck.class_id);
  w.u16(method::kBasicAck.method_id);
  w.u64(delivery_tag);
  w.u8(multiple ? 1 : 0);
  end_frame(out, at);
}

}  // namespace firemq::amqp
