// A client's byte stream to a broker: TCP (client_tcp.h) or TLS over it (client_tls.h). The FireMQ framing
// (wire.h) and the WebSocket client (client_websocket.h) run on top of either without knowing which.
//
// Every call takes a deadline and returns by it: cases must never hang. One thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "harness/model/clock.h"
#include "protocol/bytes.h"

namespace firemq::conform {

// What one read yielded.
struct ReadOutcome {
  enum class Kind { data, timeout, closed } kind = Kind::data;
  std::size_t bytes = 0;  // kind == data: how many were read (at least 1)
  std::string how;        // kind == closed: "end of stream", "connection reset by peer", ...
};

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Writes all of `bytes`; false once the stream is closed or broken, or the deadline passed.
  virtual bool write_all(ByteView bytes, Clock::time_point deadline) = 0;
  // Reads what is there (waiting until the deadline for at least one byte).
  virtual ReadOutcome read_some(std::span<std::uint8_t> into, Clock::time_point deadline) = 0;
  // Closes at once: no close_notify, no FIN handshake to wait for.
  virtual void close() = 0;
};

// Milliseconds until `deadline` for poll(): 0 once it passed, at most a minute per call.
int millis_until(Clock::time_point deadline);
// Waits until `fd` has one of `events` (or an error or hang-up); false when the deadline passed first.
bool wait_for_fd(int fd, short events, Clock::time_point deadline);

}  // namespace firemq::conform
