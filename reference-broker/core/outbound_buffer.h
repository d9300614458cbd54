// Where a connection's frames go: straight onto the end of its outbound buffer, which the connection engine
// (net/connection.h) writes out. Both protocols encode onto it with no buffer of a frame's own: FireMQ's
// session replies (net/fire_protocol.h) and AMQP's channels (amqp/). No I/O here.
#pragma once

#include <cstddef>

#include "protocol/bytes.h"

namespace firemq {

class OutboundBuffer {
 public:
  // `append(Bytes&)` encodes frames in their stream form onto the end of the buffer. They are counted against
  // the engine's bounds (kMaxPendingBytes, the memory watermark), and its writer is woken. Once the connection
  // has stopped, nothing is appended.
  template <class Append>
  void queue(Append&& append) {
    Bytes* out = outbound();
    if (out == nullptr) return;
    const std::size_t before = out->size();
    append(*out);
    queued(out->size() - before);
  }
  // Bytes already encoded.
  void write(ByteView bytes) {
    queue([&](Bytes& out) { out.insert(out.end(), bytes.begin(), bytes.end()); });
  }
  // Close the socket once every frame queued so far is written (bounded by kMaxClosingTime).
  virtual void close_after_flush() = 0;

 protected:
  ~OutboundBuffer() = default;
  virtual Bytes* outbound() = 0;  // nullptr once stopped
  virtual void queued(std::size_t bytes) = 0;
};

}  // namespace firemq
