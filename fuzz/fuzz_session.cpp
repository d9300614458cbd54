// Fuzzes the broker's session logic with the frames a peer could send: the input is a TCP stream (after the
// preamble) fed to two sessions of one broker core in turns, so that topology, publishing, consuming, acks and
// cross-connection effects (exclusive queues, deleted queues, requeues) meet. Nothing may crash, leak or trip a
// sanitizer, whatever the frames say; a fatal error must stop the session from acting on more frames.
//
// Input layout: byte 0 picks which session gets each frame (bit i for frame i, cycling); the rest is frames.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "protocol/frame.h"
#include "reference-broker/session/session.h"

namespace {

struct CountingOutbox : firemq::Outbox {
  std::size_t frames = 0;
  bool closing = false;
  void send(const firemq::Message& m, firemq::ByteView payload) override {
    (void)firemq::encode_frame(m, payload);  // every reply must encode
    ++frames;
  }
  void close_after_flush() override { closing = true; }
};

const firemq::Definitions& definitions() {
  static const firemq::Definitions d = *firemq::Definitions::defaults();
  return d;
}

firemq::op::Hello good_hello() {
  firemq::op::Hello hello;
  hello.ver = 1;
  hello.auth = {"plain", "guest", "guest"};
  return hello;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t routing = data[0];
  firemq::BrokerConfig config;
  firemq::ManualTime time;
  firemq::Core core(definitions(), time);
  CountingOutbox out_a, out_b;
  firemq::Session a(firemq::SessionEnv{config, definitions(), core}, out_a, "a");
  firemq::Session b(firemq::SessionEnv{config, definitions(), core}, out_b, "b");
  a.on_message(good_hello(), {});
  b.on_message(good_hello(), {});

  firemq::FrameDecoder decoder(firemq::StreamSide::client, 1 << 20);
  firemq::ByteView rest(data + 1, size - 1);
  for (unsigned i = 0; !rest.empty(); ++i) {
    const auto step = decoder.feed(rest);
    rest = rest.subspan(step.consumed);
    if (step.state == firemq::FrameDecoder::State::error) break;
    if (step.state != firemq::FrameDecoder::State::frame) continue;
    firemq::Session& session = (routing >> (i % 8)) & 1 ? b : a;
    CountingOutbox& out = &session == &b ? out_b : out_a;
    const std::size_t before = out.frames;
    const bool was_closing = session.state() == firemq::Session::State::closing;
    session.on_frame(decoder.take_frame());
    if (was_closing && out.frames != before) std::abort();  // a closing session answers nothing
    session.flush();
    time.advance(routing);  // time passes between frames, so TTLs and x-expires fire too
    core.tick();
  }
  a.on_connection_lost();
  return 0;
}
