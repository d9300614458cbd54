// A test client's connection to a broker over TCP: raw bytes out, frames in, every wait bounded by a
// deadline. Blocking sockets with poll(), one connection per case step list, used from one thread at a time.
//
// Cases must never hang: every receive takes a deadline, and the connect has one too.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "protocol/error.h"
#include "protocol/frame.h"

namespace firemq::conform {

using Clock = std::chrono::steady_clock;

// What a receive can yield.
struct FrameEvent {
  RawFrame frame;
};
struct ClosedEvent {
  std::string how;  // "end of stream", "connection reset", ...
};
struct TimeoutEvent {};
struct BadFramingEvent {  // the bytes the broker sent could not be framed
  Error error;
};
using WireEvent = std::variant<FrameEvent, ClosedEvent, TimeoutEvent, BadFramingEvent>;

class WireConnection {
 public:
  WireConnection() = default;
  WireConnection(const WireConnection&) = delete;
  WireConnection& operator=(const WireConnection&) = delete;
  ~WireConnection();

  // Connects to host:port; the error says what failed (resolve, refused, timeout).
  Result<bool, std::string> connect(const std::string& host, std::uint16_t port, Clock::time_point deadline);
  // Writes all of `bytes`; false once the connection is closed or broken.
  bool send(ByteView bytes, Clock::time_point deadline);
  // The next frame, or why there is none before the deadline.
  WireEvent receive(Clock::time_point deadline);
  // Closes abruptly (no close frame).
  void disconnect();
  bool is_open() const { return fd_ >= 0 && !closed_; }

 private:
  int fd_ = -1;
  bool closed_ = false;
  std::string closed_how_;
  // Server frames can be large (up to max_frame); the decoder still checks len before allocating.
  FrameDecoder decoder_{StreamSide::client, 64 * 1024 * 1024};
  Bytes inbox_;  // received bytes not yet fed to the decoder
  std::size_t inbox_used_ = 0;
};

// Where a tool connects, and as whom (firemq-bench, firemq-bench-durable, firemq-killtest).
struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
  std::string user, password, vhost;
};

// Connects, sends the preamble and hello (with `client_name` as client.name), and waits for welcome, all before
// `deadline`; the error says what failed.
Result<std::unique_ptr<WireConnection>, std::string> open_session(const Endpoint& endpoint, const std::string& client_name,
                                                                  Clock::time_point deadline);

}  // namespace firemq::conform
