// Fuzzes the AMQP 0-9-1 decoders with what a client could send: the incremental frame decoder (protocol header,
// then frames, fed in chunks whose sizes the input chooses), each frame's method or content header, and field
// tables on their own; a method that decodes must encode back to the same method. With the input's first bit
// set, the bytes go to a whole AMQP connection (handshake, channels, sessions of one broker core) instead.
// Nothing may crash, leak or trip a sanitizer; no frame exceeds frame-max.
//
// Input layout: byte 0: bit 7 chooses the connection, the rest seeds the chunk sizes; then the byte stream.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "protocol/amqp/content.h"
#include "protocol/amqp/frame.h"
#include "protocol/amqp/message_methods.h"
#include "protocol/amqp/methods.h"
#include "reference-broker/amqp/amqp_connection_core.h"
#include "reference-broker/core/time_source.h"

namespace {

using namespace firemq;

std::size_t next_chunk(std::uint32_t& state) {
  state = state * 1103515245u + 12345u;
  return 1 + (state >> 16) % 64;
}

// The hot path's readers (message_methods.h) read a payload exactly when the generic decoder does, and the same
// fields.
void check_message_methods(ByteView payload, const Result<amqp::Method>& method) {
  const bool publish = method && method->id() == amqp::method::kBasicPublish;
  auto fields = amqp::read_basic_publish(payload);
  if (fields.has_value() != publish) std::abort();
  if (publish && (fields->exchange != method->text("exchange") || fields->routing_key != method->text("routing_key") ||
                  fields->mandatory != method->flag("mandatory") || fields->immediate != method->flag("immediate"))) {
    std::abort();
  }
  const bool settle = method && (method->id() == amqp::method::kBasicAck || method->id() == amqp::method::kBasicNack ||
                                 method->id() == amqp::method::kBasicReject);
  auto settlement = amqp::read_basic_settle(payload);
  if (settlement.has_value() != settle) std::abort();
  if (settle && (settlement->delivery_tag != method->number("delivery_tag") ||
                 settlement->multiple != method->flag("multiple") || settlement->requeue != method->flag("requeue"))) {
    std::abort();
  }
}

void decode_payload(const amqp::Frame& frame) {
  // Whatever decodes encodes to bytes that decode and encode to the same bytes again. (Bytes, not values, are
  // compared: a NaN in a table is not equal to itself; the first encoding may differ from the input, since
  // unused bits are dropped and `L` becomes `l`.)
  if (frame.type == amqp::FrameType::header) {
    auto header = amqp::decode_content_header(frame.payload);
    if (!header) return;
    const Bytes once = amqp::encode_content_header(*header);
    auto again = amqp::decode_content_header(once);
    if (!again || amqp::encode_content_header(*again) != once) std::abort();
    return;
  }
  if (frame.type != amqp::FrameType::method) return;
  auto method = amqp::decode_method(frame.payload);
  check_message_methods(frame.payload, method);
  if (!method) return;
  const Bytes once = amqp::encode_method(*method);
  auto again = amqp::decode_method(once);
  if (!again || amqp::encode_method(*again) != once) std::abort();
}

void fuzz_decoders(std::uint32_t state, ByteView stream) {
  amqp::FrameDecoder decoder;
  decoder.set_frame_max(amqp::kFrameMinSize * 4);
  while (!stream.empty()) {
    ByteView chunk = stream.first(std::min(next_chunk(state), stream.size()));
    stream = stream.subspan(chunk.size());
    while (!chunk.empty()) {
      auto step = decoder.feed(chunk);
      chunk = chunk.subspan(step.consumed);
      if (step.state == amqp::FrameDecoder::State::error) return;
      if (step.state == amqp::FrameDecoder::State::bad_protocol_header) return;
      if (step.state != amqp::FrameDecoder::State::frame) continue;
      const amqp::Frame frame = decoder.take_frame();
      if (frame.payload.size() + amqp::kFrameOverhead > decoder.frame_max()) std::abort();
      decode_payload(frame);
    }
  }
}

void fuzz_table(ByteView bytes) {
  amqp::WireReader in(bytes);
  (void)amqp::read_table(in);
}

struct NullWire final : OutboundBuffer {
  Bytes written;  // emptied after each write: nothing reads it
  Bytes* outbound() override { return &written; }
  void queued(std::size_t) override { written.clear(); }
  void close_after_flush() override {}
};

void fuzz_connection(std::uint32_t state, ByteView stream) {
  static const Definitions definitions = *Definitions::parse(
      R"({"users": [{"name": "guest", "password": "guest"}], "vhosts": [{"name": "/"}],
          "permissions": [{"user": "guest", "vhost": "/"}]})");
  BrokerConfig config;
  ManualTime time;
  Core core(definitions, time);
  NullWire wire;
  AmqpConnectionCore connection(SessionEnv{config, definitions, core}, wire, "fuzz", {});
  while (!stream.empty()) {
    ByteView chunk = stream.first(std::min(next_chunk(state), stream.size()));
    stream = stream.subspan(chunk.size());
    connection.feed(chunk);
    connection.flush();
    time.advance(10);
    core.tick();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const ByteView stream(data + 1, size - 1);
  if (data[0] & 0x80) {
    fuzz_connection(data[0] & 0x7f, stream);
  } else {
    fuzz_decoders(data[0], stream);
    fuzz_table(stream);
  }
  return 0;
}
