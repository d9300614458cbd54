// The ws:// and wss:// transports' client: the RFC 6455 opening handshake and framing, over a TcpStream or
// a TlsStream. The upgrade request is written by hand; the response is parsed with Boost.Beast's
// http::response_parser (bytes fed with put(), no Beast I/O), then checked (101, Sec-WebSocket-Accept).
//
// Hand-written on purpose, as websocket_framing.h says: the harness must be able to send what a correct
// client library refuses to send (a text message, a message in N fragments, two FireMQ frames in one
// message, raw bytes). The client itself behaves: its frames are masked, it answers pings with pongs and a
// close with a close.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "harness/client/byte_stream.h"
#include "harness/client/websocket_framing.h"
#include "harness/model/transport.h"
#include "protocol/error.h"

namespace firemq::conform {

// Why an upgrade did not happen: the server answered with another status (http_status set), or the answer
// was not a valid WebSocket handshake, or none came.
struct UpgradeFailure {
  std::string message;
  int http_status = 0;  // 0: no HTTP answer at all
};
using Upgraded = Result<std::monostate, UpgradeFailure>;  // as wire.h's Connected

class WebSocketClient {
 public:
  explicit WebSocketClient(std::unique_ptr<ByteStream> stream, std::size_t max_message);

  // GET <path>?vhost=<percent-encoded vhost_query> with the upgrade headers; succeeds on a valid 101.
  Upgraded upgrade(const WireAddress& address, Clock::time_point deadline);

  // A message of `opcode` (text or binary) in `fragments` frames (the first of its opcode, the others
  // continuations; the payload split as evenly as it goes; at least one byte each when there are enough).
  bool send_message(WsOpcode opcode, ByteView payload, std::size_t fragments, Clock::time_point deadline);
  // One masked frame, as given (a ping, a close, a lone continuation...).
  bool send_frame(bool fin, std::uint8_t opcode, ByteView payload, Clock::time_point deadline);
  // Bytes as they are: anything at all.
  bool send_raw(ByteView bytes, Clock::time_point deadline);
  // Binary messages, one unfragmented frame each, written together (one write for a batch of FireMQ frames).
  bool send_binary_messages(const std::vector<Bytes>& messages, Clock::time_point deadline);

  // What receive() yields. Pings are answered inside it and not reported.
  struct Closed {
    std::string how;
    std::optional<std::uint16_t> code;  // from the server's close frame, if it sent one
    std::string reason;
  };
  struct Pong {
    Bytes payload;
  };
  struct Timeout {};
  struct ProtocolError {
    std::string why;
  };
  using Event = std::variant<WsMessageAssembler::Message, Pong, Closed, Timeout, ProtocolError>;
  Event receive(Clock::time_point deadline);

  void close();  // abruptly: no close frame
  bool is_open() const { return !closed_; }

 private:
  Event on_control(const WsFrame& frame, Clock::time_point deadline);
  Event closed(std::string how, std::optional<std::uint16_t> code = {}, std::string reason = {});

  std::unique_ptr<ByteStream> stream_;
  WsFrameParser parser_;
  WsMessageAssembler assembler_;
  Bytes inbox_;  // received bytes not yet parsed (the handshake's leftovers first)
  std::size_t inbox_used_ = 0;
  bool close_sent_ = false;
  bool closed_ = false;
  std::optional<Closed> closed_event_;
};

}  // namespace firemq::conform
