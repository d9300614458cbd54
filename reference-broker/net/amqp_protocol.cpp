#include "reference-broker/net/amqp_protocol.h"

namespace firemq {
namespace {

// Fairness between connections, as FireMQ's engine has it (fire_protocol.cpp's kFramesPerTurn): a publisher's
// 64 KiB read can hold some 800 publishes of 16 B. Processed in one go, a consumer of the same queue (another
// connection, with prefetch 100) gets one window of deliveries per such read and falls ever further behind. So a
// read is processed a number of frames at a time, with a turn of the event loop between, in which the other
// connections read their acks and write their deliveries. A number of frames, not of bytes: what a consumer
// takes per turn is a number of messages, and FireMQ's 16 frames did best there. An AMQP publish is three
// frames (method, content header, body), so 48 frames are FireMQ's 16 publishes. (It was 4 KiB of bytes: some
// 58 publishes of 16 B but under 4 of 1 KiB a turn, and 16 turns for one 64 KiB body.)
constexpr std::size_t kFramesPerTurn = 48;

}  // namespace

AmqpProtocol::AmqpProtocol(SessionEnv env, ConnectionOutput& output, const Transport& transport)
    : output_(output), core_(env, output, transport.describe(), transport.hints()) {}

ConnectionProtocol::Phase AmqpProtocol::phase() const {
  switch (core_.state()) {
    case AmqpConnectionCore::State::open: return Phase::open;
    case AmqpConnectionCore::State::closing: return Phase::closing;
    default: return Phase::handshake;  // from the protocol header to connection.open
  }
}

bool AmqpProtocol::take_input(Transport& transport) {
  const ByteView unread = transport.unread_bytes();
  if (unread.empty()) return false;
  const std::size_t taken = core_.feed(unread, kFramesPerTurn);
  transport.consume_bytes(taken);
  return taken < unread.size();  // frames are left: after the other connections' turn
}

bool AmqpProtocol::close_by_operator(const std::string& reason) {
  core_.close_forced(reason);  // connection.close 320, in the handshake too
  return true;
}

}  // namespace firemq
