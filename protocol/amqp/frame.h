// AMQP 0-9-1 framing (the spec's section 4.2.3, "General frame format", and 4.2.2, "Protocol header"):
//
//   protocol header, client first:  'A' 'M' 'Q' 'P' 0 0 9 1
//   frame:  type : u8 | channel : u16 | size : u32 | payload (size bytes) | frame-end 0xCE
//
// frame-max counts the whole frame, its 7 header bytes and the frame-end included, as RabbitMQ counts it. Until
// tune-ok agrees a larger one, frames are limited to frame-min-size (4096).
//
// Nothing here does I/O: bytes in, frames out. A FrameDecoder is not thread-safe; one per connection.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "protocol/bytes.h"
#include "protocol/error.h"
#include "protocol/reply_codes.h"

namespace firemq::amqp {

inline constexpr std::array<std::uint8_t, 8> kProtocolHeader = {'A', 'M', 'Q', 'P', 0, 0, 9, 1};
inline constexpr std::uint8_t kFrameEnd = 0xCE;
inline constexpr std::size_t kFrameHeaderSize = 7;                   // type, channel, size
inline constexpr std::size_t kFrameOverhead = kFrameHeaderSize + 1;  // and the frame-end octet
inline constexpr std::size_t kFrameMinSize = 4096;                   // "frame-min-size"

enum class FrameType : std::uint8_t { method = 1, header = 2, body = 3, heartbeat = 8 };

// The reply codes AMQP 0-9-1 adds to FireMQ's table (protocol/reply_codes.h holds the shared ones).
inline constexpr std::uint16_t kContentTooLarge = 311;
inline constexpr std::uint16_t kNoConsumers = 313;
inline constexpr std::uint16_t kChannelError = 504;
inline constexpr std::uint16_t kUnexpectedFrame = 505;
// The shared ones, as the numbers AMQP's reply_code fields carry.
inline constexpr std::uint16_t kNoRoute = static_cast<std::uint16_t>(ReplyCode::no_route);
inline constexpr std::uint16_t kConnectionForced = static_cast<std::uint16_t>(ReplyCode::connection_forced);
inline constexpr std::uint16_t kAccessRefused = static_cast<std::uint16_t>(ReplyCode::access_refused);
inline constexpr std::uint16_t kNotFound = static_cast<std::uint16_t>(ReplyCode::not_found);
inline constexpr std::uint16_t kResourceLocked = static_cast<std::uint16_t>(ReplyCode::resource_locked);
inline constexpr std::uint16_t kPreconditionFailed = static_cast<std::uint16_t>(ReplyCode::precondition_failed);
inline constexpr std::uint16_t kFrameError = static_cast<std::uint16_t>(ReplyCode::frame_error);
inline constexpr std::uint16_t kCommandInvalid = static_cast<std::uint16_t>(ReplyCode::command_invalid);
inline constexpr std::uint16_t kResourceError = static_cast<std::uint16_t>(ReplyCode::resource_error);
inline constexpr std::uint16_t kNotAllowed = static_cast<std::uint16_t>(ReplyCode::not_allowed);
inline constexpr std::uint16_t kNotImplemented = static_cast<std::uint16_t>(ReplyCode::not_implemented);

// A connection-level AMQP error: the decoders' refusals. Always fatal (connection.close).
Error connection_error(std::uint16_t code, std::string msg);

struct Frame {
  FrameType type = FrameType::heartbeat;
  std::uint16_t channel = 0;
  Bytes payload;
  bool operator==(const Frame&) const = default;
};

// A decoded frame whose payload is borrowed: from the chunk fed, when the whole frame was in it (the hot path: no
// copy, no allocation), or from the decoder's own buffer for a frame that arrived in pieces. Valid until the
// next feed.
struct FrameView {
  FrameType type = FrameType::heartbeat;
  std::uint16_t channel = 0;
  ByteView payload;
  Frame copy() const { return Frame{type, channel, Bytes(payload.begin(), payload.end())}; }
};

// An incremental decoder for a server's side of the connection: the protocol header, then frames. Feed it chunks
// of any size. A frame wholly inside a chunk is read in place; only one cut by the chunk's end is buffered (at
// most one frame), and its size field is checked against the limit before anything is allocated for it.
class FrameDecoder {
 public:
  enum class State {
    need_more,
    frame,                // frame(), or take_frame()
    bad_protocol_header,  // "the server MUST ... reply with a valid protocol header and then close the socket"
    error,                // error(): 501 frame-error
  };
  struct Step {
    std::size_t consumed;
    State state;
  };

  // `expect_protocol_header`: false for a decoder of frames only (tests, a client's side).
  explicit FrameDecoder(bool expect_protocol_header = true) : header_pending_(expect_protocol_header) {}

  Step feed(ByteView chunk);
  // The frame just decoded, valid until the next feed; take_frame() copies it.
  const FrameView& frame() const { return frame_; }
  Frame take_frame() const { return frame_.copy(); }
  const Error& error() const { return error_; }
  // The negotiated frame-max (tune-ok); 0 means no limit beyond the size field's.
  void set_frame_max(std::size_t frame_max) { frame_max_ = frame_max; }
  std::size_t frame_max() const { return frame_max_; }
  bool awaiting_protocol_header() const { return header_pending_; }

 private:
  Step feed_protocol_header(ByteView chunk);
  // The 7 header bytes: the frame's whole size, or 0 (error_ says why) for an unknown type or one beyond frame-max.
  std::size_t check_frame_header(ByteView header);
  // The whole frame, its frame-end checked: frame_ borrows its payload.
  bool take_whole_frame(ByteView whole);

  bool header_pending_;
  std::size_t frame_max_ = kFrameMinSize;
  Bytes buffer_;            // the protocol header, then a frame cut by a chunk's end: header, payload and frame-end
  std::size_t wanted_ = 0;  // the buffered frame's whole size, once its header is read
  bool buffered_frame_taken_ = false;  // frame_ borrows buffer_: it is cleared at the next feed
  FrameView frame_;
  Error error_;
};

// The frames the broker sends, whole.
Bytes encode_frame(FrameType type, std::uint16_t channel, ByteView payload);
Bytes encode_heartbeat();
// A frame written in place onto the end of `out`: begin_frame writes its header with the size left open and
// returns where it starts; the payload is appended; end_frame fills in the size and adds the frame-end.
std::size_t begin_frame(Bytes& out, FrameType type, std::uint16_t channel);
void end_frame(Bytes& out, std::size_t frame_at);

}  // namespace firemq::amqp
