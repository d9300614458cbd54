// The WebSocket framing of RFC 6455, section 5, as the harness's client needs it: masked client frames out,
// server frames in (incrementally), data frames put back together into messages, and the handshake's
// Sec-WebSocket-Accept. No I/O: bytes in, frames out (client_websocket.h does the I/O).
//
// Written by hand on purpose, not taken from a WebSocket library: conformance cases must be able to send
// what a correct client library refuses to send (a text message, a message cut into many fragments, two
// FireMQ frames in one message, bytes that are no frame at all).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "protocol/bytes.h"

namespace firemq::conform {

// Opcodes (RFC 6455, 5.2).
enum class WsOpcode : std::uint8_t {
  continuation = 0x0,
  text = 0x1,
  binary = 0x2,
  close = 0x8,
  ping = 0x9,
  pong = 0xa
};
inline bool is_control(std::uint8_t opcode) { return (opcode & 0x8) != 0; }

// A client frame: FIN, the opcode, the 7-, 16- or 64-bit length, the masking key and the masked payload.
// `mask` absent: an unmasked frame (as a server sends; for tests).
Bytes encode_ws_frame(bool fin, std::uint8_t opcode, ByteView payload, std::optional<std::array<std::uint8_t, 4>> mask);
// A fresh random masking key (RFC 6455 asks that it be unpredictable).
std::array<std::uint8_t, 4> random_mask();

struct WsFrame {
  bool fin = true;
  std::uint8_t opcode = 0;
  bool masked = false;  // a server must not mask (5.1); the client reports it
  Bytes payload;        // unmasked
};

// Reads frames from a byte stream, a chunk at a time (as protocol/frame.h's FrameDecoder does for FireMQ):
// feed() consumes bytes until a frame is complete, an error is found, or the chunk is used up. The length
// is checked against `max_payload` before anything is allocated for the payload.
class WsFrameParser {
 public:
  enum class State { need_more, frame, error };
  struct Step {
    std::size_t consumed;
    State state;
  };
  explicit WsFrameParser(std::size_t max_payload) : max_payload_(max_payload) {}
  Step feed(ByteView chunk);
  WsFrame take_frame();
  const std::string& error() const { return error_; }
  bool inside_frame() const { return !head_.empty() || stage_ == Stage::payload; }

 private:
  enum class Stage { head, payload, ready, failed };
  std::size_t head_size() const;  // the frame's header length, once its first two bytes are in
  Step fail(std::size_t consumed, std::string why);

  std::size_t max_payload_;
  Stage stage_ = Stage::head;
  Bytes head_;  // the frame's header bytes as they arrive (2 to 14)
  std::size_t payload_expected_ = 0;
  WsFrame frame_;
  std::array<std::uint8_t, 4> mask_{};
  std::string error_;
};

// Puts data frames together into messages (5.4): a text or binary frame starts one, continuation frames
// add to it, FIN ends it. Control frames may come between fragments and are handed back as they are.
class WsMessageAssembler {
 public:
  struct Message {
    WsOpcode opcode;  // text or binary
    Bytes data;
  };
  struct Control {
    WsFrame frame;
  };
  struct Incomplete {};  // a fragment was taken; the message goes on
  struct Error {
    std::string why;
  };
  using Outcome = std::variant<Message, Control, Incomplete, Error>;
  explicit WsMessageAssembler(std::size_t max_message) : max_message_(max_message) {}
  Outcome add(WsFrame frame);

 private:
  std::size_t max_message_;
  std::optional<WsOpcode> opcode_;  // of the message being assembled
  Bytes data_;
};

// The close frame's payload: a 2-byte code and a UTF-8 reason (5.5.1); no code when the payload is empty.
struct WsClose {
  std::optional<std::uint16_t> code;
  std::string reason;
};
WsClose parse_close_payload(ByteView payload);
Bytes close_payload(std::uint16_t code, std::string_view reason);

std::string base64_encode(ByteView bytes);
// Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + the RFC's GUID)) (4.2.2).
std::string websocket_accept_for(std::string_view key);

}  // namespace firemq::conform
