#include "reference-broker/net/amqp_protocol.h"

#include <algorithm>

namespace firemq {
namespace {

// Fairness between connections: a publisher's 64 KiB read can hold some 800 publishes of 16 B. Processed in one
// go, a consumer of the same queue (another connection, with prefetch 100) gets one window of deliveries per
// such read and falls ever further behind. So a read is processed in slices of this size with a turn of the
// event loop between them, in which the other connections read their acks and write their deliveries. With
// 4 KiB (about 50 such publishes) a consumer of a full-speed persistent publisher received 3x more than with the
// whole read at once; smaller slices cost the publisher more than they gave the consumer (docs/benchmarks.md).
// A frame larger than a slice is finished in one turn, though (take_input): cut into 4 KiB turns, a 64 KiB body
// cost the broker twice what it costs on FireMQ, whose engine turns per frame, not per byte.
constexpr std::size_t kFeedSlice = 4 * 1024;

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
  const std::size_t slice_size = std::max(kFeedSlice, core_.bytes_to_finish_frame());
  const ByteView slice = transport.next_bytes(slice_size);
  if (slice.empty()) return false;
  core_.feed(slice);
  return slice.size() == slice_size;  // a full slice: the read may hold more
}

bool AmqpProtocol::close_by_operator(const std::string& reason) {
  core_.close_forced(reason);  // connection.close 320, in the handshake too
  return true;
}

}  // namespace firemq
