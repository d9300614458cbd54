#include "reference-broker/net/fire_protocol.h"

namespace firemq {
namespace {

// Fairness between connections: a publisher's 64 KiB read holds up to some 1,600 publishes of 16 B. Processed in
// one go, a consumer of the same queue on another connection gets one credit window of deliveries per such read
// and falls ever further behind. So at most this many frames of a read are processed per turn of the event
// loop; between two turns the other connections read their credit and write their deliveries. Counted in frames,
// not bytes as AMQP's kFeedSlice: what a consumer takes per turn is a number of messages (its credit), and 1 KiB
// messages cut into 2 KiB slices cost more turns than they gave. 16 and 32 frames did best in every row of
// firemq-bench, 64 and more let the consumer fall behind again (docs/benchmarks.md, issue 15).
constexpr std::size_t kFramesPerTurn = 16;

}  // namespace

FireProtocol::FireProtocol(SessionEnv env, ConnectionOutput& output, const Transport& transport)
    : output_(output), session_(env, *this, transport.describe(), transport.hints()) {}

ConnectionProtocol::Phase FireProtocol::phase() const {
  switch (session_.state()) {
    case Session::State::awaiting_hello: return Phase::handshake;
    case Session::State::open: return Phase::open;
    case Session::State::closing: break;
  }
  return Phase::closing;
}

bool FireProtocol::take_input(Transport& transport) {
  for (std::size_t taken = 0; session_.state() != Session::State::closing; ++taken) {
    if (taken == kFramesPerTurn) return true;
    // The limit changes with the session's state (65,536 before welcome, max_frame after), frame by frame.
    NextFrame next = transport.next_frame(session_.max_frame());
    if (next.kind == NextFrame::Kind::need_more) return false;
    if (next.kind == NextFrame::Kind::error) {
      session_.on_framing_error(next.error);
      return false;
    }
    session_.on_frame(next.frame);
  }
  return false;
}

void FireProtocol::tell_alarm(bool alarm) {
  if (session_.state() != Session::State::open) return;
  // "The server sends pause: true when a memory or disk alarm fires ... pause: false" when they clear.
  if (alarm && session_.has_published() && !told_pause_) {
    send(op::Flow{true}, {});
    told_pause_ = true;
  } else if (!alarm && told_pause_) {
    send(op::Flow{false}, {});
    told_pause_ = false;
  }
}

bool FireProtocol::close_by_operator(const std::string& reason) {
  if (session_.state() == Session::State::awaiting_hello) return false;  // no welcome yet: the socket just closes
  session_.close_forced(reason);
  return true;
}

void FireProtocol::send(const Message& message, ByteView payload) {
  output_.queue([&](Bytes& out) { append_frame(out, message, payload); });  // a WebSocket transport leaves len out
}

void FireProtocol::send_deliver(const DeliverView& deliver, ByteView body, const MessageExtras& /*no FireMQ field*/) {
  output_.queue([&](Bytes& out) { append_frame(out, deliver, body); });
}

}  // namespace firemq
