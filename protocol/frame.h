// The frame layout of the spec's "Frame format" section, and its limits.
//
//   TCP, TLS:   len : u32 | op : u8 | hlen : u32 | header (hlen bytes) | payload
//   WebSocket:             op : u8 | hlen : u32 | header (hlen bytes) | payload   (one binary message)
//
// len counts every byte after the len field. A TCP or TLS client sends the preamble "FMQ1" before its first
// frame; a WebSocket client does not. The size of a frame is 4 + len, on every transport: the len field
// counts, as AMQP's frame-max counts the whole frame (docs/spec-notes.md, "Frame size limits").
//
// Nothing here does I/O: bytes in, frames out. A FrameDecoder is not thread-safe; one per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol/bytes.h"
#include "protocol/error.h"

namespace firemq {

inline constexpr std::string_view kPreamble = "FMQ1";
inline constexpr std::size_t kLenSize = 4;        // the len field
inline constexpr std::size_t kFixedSize = 1 + 4;  // op and hlen, counted by len
inline constexpr std::size_t kMinFrameSize = kLenSize + kFixedSize;
inline constexpr std::size_t kMaxFrameBeforeWelcome = 65536;       // "at most 65 536 bytes" before welcome
inline constexpr std::size_t kDefaultMaxFrame = 16 * 1024 * 1024;  // welcome.max_frame by default

// One frame as it came off the wire: the op byte, the raw header bytes and the payload. The header is not
// decoded yet (messages.h does that), so an unknown op or a bad header is still a well-framed frame.
class RawFrame {
 public:
  RawFrame() = default;
  // `body` is everything after the len field: op, hlen, header, payload; validated by the caller.
  explicit RawFrame(Bytes body) : body_(std::move(body)) {}

  std::uint8_t op() const { return body_[0]; }
  ByteView header() const { return ByteView(body_).subspan(kFixedSize, header_size()); }
  ByteView payload() const { return ByteView(body_).subspan(kFixedSize + header_size()); }
  // The frame's size as the limits count it: 4 + len.
  std::size_t size() const { return kLenSize + body_.size(); }

 private:
  std::size_t header_size() const { return read_u32_be(body_.data() + 1); }
  Bytes body_;
};

// Checks the part of a frame after len (op, hlen, header, payload) for the framing rules: at least 5 bytes,
// hlen within the frame, and the limit. Used by both framings.
Status check_frame_body(ByteView body, std::size_t max_frame);

// Which side of a TCP or TLS stream the decoder reads.
enum class StreamSide {
  server,  // reads what a client sends: the "FMQ1" preamble, then frames
  client,  // reads what a server sends: frames only
};

// An incremental decoder for the TCP and TLS framing. Feed it chunks of any size, one byte at a time
// included; it never buffers more than one frame, and it checks len against the limit before it
// allocates anything for the frame.
//
//   while (!bytes.empty()) {
//     auto step = decoder.feed(bytes);
//     bytes = bytes.subspan(step.consumed);
//     if (step.state == FrameDecoder::State::frame) handle(decoder.take_frame());
//     if (step.state == FrameDecoder::State::error) { send(decoder.error()); break; }
//   }
class FrameDecoder {
 public:
  enum class State { need_more, frame, error };
  struct Step {
    std::size_t consumed;  // bytes taken from the chunk given to feed()
    State state;
  };

  explicit FrameDecoder(StreamSide side, std::size_t max_frame = kMaxFrameBeforeWelcome);

  // Consumes bytes until a frame is complete, an error is found, or the chunk is used up.
  Step feed(ByteView chunk);
  // The completed frame, after feed() said State::frame. Decoding resumes with the next feed().
  RawFrame take_frame();
  // The error, after feed() said State::error: always 501 frame-error, fatal. The decoder stays failed.
  const Error& error() const { return error_; }

  // The peer closed the stream: an error when it stopped inside a frame (a truncated frame).
  Status finish() const;

  // Raises the limit once welcome has been sent (welcome.max_frame).
  void set_max_frame(std::size_t max_frame) { max_frame_ = max_frame; }
  std::size_t max_frame() const { return max_frame_; }

 private:
  enum class Stage { preamble, len, body, frame_ready, failed };

  std::size_t feed_preamble(ByteView chunk);
  std::size_t feed_len(ByteView chunk);
  std::size_t feed_body(ByteView chunk);
  void fail(std::string msg);

  Stage stage_;
  std::size_t max_frame_;
  std::uint8_t prefix_[4] = {};  // the preamble or the len field, as it arrives
  std::size_t prefix_filled_ = 0;
  std::size_t body_expected_ = 0;
  Bytes body_;
  Error error_;
};

// Decodes one WebSocket binary message as one frame.
Result<RawFrame> decode_message_frame(ByteView message, std::size_t max_frame);

// Frames a header and a payload for TCP and TLS (with len) or WebSocket (without).
Bytes frame_stream(std::uint8_t op, ByteView header, ByteView payload);
Bytes frame_message(std::uint8_t op, ByteView header, ByteView payload);

}  // namespace firemq
