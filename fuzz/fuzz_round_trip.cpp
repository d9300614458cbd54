// Fuzzes decode -> encode -> decode on whole frames: a TCP frame that decodes to a message must, once
// re-encoded, decode to the same message and payload; and its header, decoded as a plain MessagePack value,
// must encode and decode to the same value (lossless props and headers).
//
// Input layout: one or more frames in the TCP framing, as a server sends them (no preamble).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/msgpack_codec.h"

namespace {

void check_frame(const firemq::RawFrame& frame) {
  if (!frame.header().empty()) {
    auto value = firemq::decode_value(frame.header());
    if (value.ok()) {
      firemq::Bytes again;
      firemq::encode_value(*value, again);
      auto back = firemq::decode_value(again);
      if (!back.ok() || !(*back == *value)) std::abort();
    }
  }
  auto message = firemq::decode_frame(frame);
  if (!message.ok()) return;
  const firemq::Bytes encoded = firemq::encode_frame(*message, frame.payload());
  firemq::FrameDecoder decoder(firemq::StreamSide::client, firemq::kDefaultMaxFrame);
  auto step = decoder.feed(encoded);
  if (step.state != firemq::FrameDecoder::State::frame || step.consumed != encoded.size()) std::abort();
  const firemq::RawFrame again = decoder.take_frame();
  auto back = firemq::decode_frame(again);
  if (!back.ok() || !(*back == *message)) std::abort();
  if (!std::equal(again.payload().begin(), again.payload().end(), frame.payload().begin(), frame.payload().end())) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  firemq::FrameDecoder decoder(firemq::StreamSide::client, 1 << 20);
  firemq::ByteView rest(data, size);
  while (!rest.empty()) {
    auto step = decoder.feed(rest);
    rest = rest.subspan(step.consumed);
    if (step.state == firemq::FrameDecoder::State::error) return 0;
    if (step.state == firemq::FrameDecoder::State::frame) check_frame(decoder.take_frame());
  }
  return 0;
}
