// Fuzzes the incremental TCP/TLS frame decoder, reading what a client sends (preamble, then frames), fed in
// chunks whose sizes the input chooses, and decodes each frame's header. Also decodes the same bytes as one
// WebSocket message. Nothing may crash, leak or trip a sanitizer; a frame never exceeds the limit.
//
// Input layout: byte 0 seeds the chunk sizes; the rest is the byte stream.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "protocol/frame.h"
#include "protocol/messages.h"

namespace {

// Chunk sizes from 1 to 64, varied by a tiny linear congruential generator so that every split is reachable.
std::size_t next_chunk(std::uint32_t& state) {
  state = state * 1103515245u + 12345u;
  return 1 + (state >> 16) % 64;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::uint32_t state = data[0];
  firemq::ByteView stream(data + 1, size - 1);

  firemq::FrameDecoder decoder(firemq::StreamSide::server);
  bool welcomed = false;
  while (!stream.empty()) {
    firemq::ByteView chunk = stream.first(std::min(next_chunk(state), stream.size()));
    stream = stream.subspan(chunk.size());
    while (!chunk.empty()) {
      auto step = decoder.feed(chunk);
      chunk = chunk.subspan(step.consumed);
      if (step.state == firemq::FrameDecoder::State::error) return 0;
      if (step.state != firemq::FrameDecoder::State::frame) continue;
      const firemq::RawFrame frame = decoder.take_frame();
      if (frame.size() > decoder.max_frame()) std::abort();
      (void)firemq::decode_frame(frame);
      if (!welcomed) {
        decoder.set_max_frame(1 << 20);  // as a session does after welcome (kept small for the fuzzer)
        welcomed = true;
      }
    }
  }
  (void)decoder.finish();

  auto message = firemq::decode_message_frame(firemq::ByteView(data + 1, size - 1), 1 << 20);
  if (message.ok()) (void)firemq::decode_frame(*message);
  return 0;
}
