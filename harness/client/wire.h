// A test client's connection to a broker over any of the spec's transports: FireMQ bytes out, frames in,
// every wait bounded by a deadline. One connection per case step list, used from one thread at a time.
//
//   fire   TCP (client_tcp.h): FMQ1, then len-prefixed frames
//   fires  the same inside TLS (client_tls.h)
//   ws     WebSocket over TCP (client_websocket.h): one binary message per frame, without len and FMQ1
//   wss    WebSocket over TLS
//
// Callers speak the TCP framing whatever the transport: send() takes stream bytes (FMQ1, len-prefixed frames),
// and on WebSocket each complete frame leaves as one message (stream_to_messages.h). send_frame() frames for
// the connection's transport directly; the ws_* calls send what only WebSocket can say.
//
// Cases must never hang: every receive takes a deadline, and the connect has one too.
//
// A watched connection (watch()) shows every frame both ways to its wire monitor (wire_monitor.h) as it goes:
// what is sent as it is sent, what is received as soon as a read brings it (every complete frame of a read is
// framed at once and kept for receive()), and each receive that times out as proof of the broker's silence.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "harness/client/byte_stream.h"
#include "harness/client/client_websocket.h"
#include "harness/client/stream_to_messages.h"
#include "harness/model/transport.h"
#include "harness/rules/wire_monitor.h"
#include "protocol/error.h"
#include "protocol/frame.h"
#include "protocol/value.h"

namespace firemq::conform {

// What a receive can yield.
struct FrameEvent {
  RawFrame frame;
};
struct ClosedEvent {
  std::string how;                             // "end of stream", "connection reset", "WebSocket close 1000 (bye)", ...
  std::optional<std::uint16_t> ws_close_code;  // WebSocket: the code of the broker's close frame
};
struct TimeoutEvent {};
struct BadFramingEvent {  // the bytes the broker sent could not be framed
  Error error;
};
using WireEvent = std::variant<FrameEvent, ClosedEvent, TimeoutEvent, BadFramingEvent>;

// Why connect() failed. `reached`: the server answered but refused (a TLS handshake failure, an HTTP status
// instead of the WebSocket upgrade); otherwise it could not be reached at all.
struct ConnectFailure {
  std::string message;
  bool reached = false;
  int http_status = 0;  // the upgrade's refusal, when there was one
};
// A connect yields nothing but, unlike an IoStatus, its failure says more than words (the cases tell an
// unreachable server from a refusing one).
using Connected = Result<std::monostate, ConnectFailure>;

class WireConnection {
 public:
  WireConnection() = default;
  WireConnection(const WireConnection&) = delete;
  WireConnection& operator=(const WireConnection&) = delete;
  ~WireConnection();

  // Connects over the address's transport: TCP, then the TLS handshake, then the WebSocket upgrade.
  Connected connect(const WireAddress& address, Clock::time_point deadline);
  // fire:// to host:port (the tools, and probes that only need the port to answer).
  IoStatus connect(const std::string& host, std::uint16_t port, Clock::time_point deadline);

  // Shows every frame from now on to `monitor` (before connect(), so that it sees the first byte).
  void watch(std::unique_ptr<WireMonitor> monitor) { monitor_ = std::move(monitor); }
  const WireMonitor* monitor() const { return monitor_.get(); }
  // Called with each frame from the broker as soon as it is framed, whether or not a receive() takes it (the
  // case's transcript).
  void on_received(std::function<void(const RawFrame&)> log) { on_received_ = std::move(log); }

  Transport transport() const { return transport_; }
  // Writes stream bytes (FMQ1 and len-prefixed frames); on WebSocket, one message per complete frame, the
  // rest held until its frame is complete. False once the connection is closed or broken; on WebSocket, also
  // when the bytes cannot be translated (untranslatable() then says why).
  bool send(ByteView bytes, Clock::time_point deadline);
  // One frame, framed for the transport (frame_stream or frame_message).
  bool send_frame(std::uint8_t op, ByteView header, ByteView payload, Clock::time_point deadline);
  const std::string& untranslatable() const { return untranslatable_; }
  std::size_t held_back() const { return translator_.pending(); }

  // WebSocket only (false on fire and fires): a message of `opcode` in `fragments` frames; one raw frame;
  // raw bytes.
  bool ws_send_message(WsOpcode opcode, ByteView payload, std::size_t fragments, Clock::time_point deadline);
  bool ws_send_frame(bool fin, std::uint8_t opcode, ByteView payload, Clock::time_point deadline);
  bool ws_send_raw(ByteView bytes, Clock::time_point deadline);
  // Waits for the broker's next WebSocket pong (the answer to a ws_send_frame ping); frames that arrive first
  // are kept for receive().
  enum class PongWait { pong, timeout, closed, not_websocket };
  PongWait wait_ws_pong(Clock::time_point deadline);

  // The next frame, or why there is none before the deadline.
  WireEvent receive(Clock::time_point deadline);
  // Closes abruptly (no close frame).
  void disconnect();
  bool is_open() const { return open_ && !closed_; }

 private:
  WireEvent receive_stream(Clock::time_point deadline);
  WireEvent receive_websocket(Clock::time_point deadline);
  void frame_received(ByteView chunk);
  void arrived(const RawFrame& frame);
  void stream_ended();
  void watch_sent(ByteView stream_bytes);
  void watch_sent_frame(std::uint8_t op, ByteView header, ByteView payload);
  void watch_untracked();

  Transport transport_ = Transport::fire;
  bool open_ = false;
  bool closed_ = false;
  std::string closed_how_;
  std::unique_ptr<ByteStream> stream_;   // fire, fires
  std::unique_ptr<WebSocketClient> ws_;  // ws, wss (owns its stream)
  // Server frames can be large (up to max_frame); the decoder still checks len before allocating.
  FrameDecoder decoder_{StreamSide::client, 64 * 1024 * 1024};
  bool framing_failed_ = false;  // the broker's bytes stopped being frames: nothing after them is framed
  std::unique_ptr<WireMonitor> monitor_;
  std::function<void(const RawFrame&)> on_received_;
  // What the harness sends, framed again for the monitor (fire, fires: after FMQ1; ws, wss: frames alone).
  std::optional<FrameDecoder> sent_decoder_;
  bool sent_untracked_ = false;
  StreamToMessages translator_;
  std::string untranslatable_;
  std::size_t ws_pongs_ = 0;
  bool stop_at_pong_ = false;      // wait_ws_pong: a pong ends the wait
  std::deque<WireEvent> pending_;  // framed but not yet taken by receive(), in order
};

// Where a tool connects, and as whom (firemq-bench, firemq-bench-durable, firemq-killtest).
struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
  std::string user, password, vhost;
};

// Connects, sends the preamble and hello (with `client_name` as client.name), and waits for welcome, all before
// `deadline`; the error says what failed.
Result<std::unique_ptr<WireConnection>, std::string> open_session(const Endpoint& endpoint,
                                                                  const std::string& client_name,
                                                                  Clock::time_point deadline);
// The same over any transport.
Result<std::unique_ptr<WireConnection>, std::string> open_session(const WireAddress& address, const std::string& user,
                                                                  const std::string& password, const std::string& vhost,
                                                                  const Map& client, Clock::time_point deadline);

}  // namespace firemq::conform
