#include "protocol/amqp/frame.h"

#include <algorithm>

#include "protocol/amqp/wire.h"

namespace firemq::amqp {

Error connection_error(std::uint16_t code, std::string msg) { return Error{code, std::move(msg), true, 0}; }

FrameDecoder::Step FrameDecoder::feed_protocol_header(ByteView chunk) {
  // The whole 8 bytes are read before they are judged, as RabbitMQ does, so a client that sends an older
  // version's header ("AMQP" 1 1 0 9) is told ours rather than cut off mid-header.
  const std::size_t n = std::min(chunk.size(), kProtocolHeader.size() - buffer_.size());
  buffer_.insert(buffer_.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n));
  if (buffer_.size() < kProtocolHeader.size()) return {n, State::need_more};
  if (!std::equal(buffer_.begin(), buffer_.end(), kProtocolHeader.begin())) return {n, State::bad_protocol_header};
  buffer_.clear();
  header_pending_ = false;
  return {n, State::need_more};
}

FrameDecoder::Step FrameDecoder::fail(std::size_t consumed, std::string msg) {
  error_ = connection_error(501, std::move(msg));
  return {consumed, State::error};
}

// With the 7 header bytes in buffer_: the type and the size are checked before the payload is read.
bool FrameDecoder::check_frame_header() {
  WireReader in(buffer_);
  const std::uint8_t type = in.u8();
  in.u16();
  const std::uint32_t size = in.u32();
  if (type != 1 && type != 2 && type != 3 && type != 8) {
    error_ = connection_error(501, "unknown frame type " + std::to_string(type));
    return false;
  }
  const std::uint64_t whole = std::uint64_t{size} + kFrameOverhead;
  if (frame_max_ != 0 && whole > frame_max_) {
    error_ = connection_error(501, "frame of " + std::to_string(whole) + " bytes is larger than frame-max " +
                                       std::to_string(frame_max_));
    return false;
  }
  wanted_ = static_cast<std::size_t>(whole);
  return true;
}

FrameDecoder::Step FrameDecoder::feed(ByteView chunk) {
  if (header_pending_) return feed_protocol_header(chunk);
  std::size_t consumed = 0;
  while (consumed < chunk.size()) {
    const std::size_t target = wanted_ == 0 ? kFrameHeaderSize : wanted_;
    const std::size_t n = std::min(chunk.size() - consumed, target - buffer_.size());
    buffer_.insert(buffer_.end(), chunk.begin() + static_cast<std::ptrdiff_t>(consumed),
                   chunk.begin() + static_cast<std::ptrdiff_t>(consumed + n));
    consumed += n;
    if (buffer_.size() < target) break;
    if (wanted_ == 0) {
      if (!check_frame_header()) return {consumed, State::error};
      buffer_.reserve(wanted_);
      continue;
    }
    if (buffer_.back() != kFrameEnd) {
      return fail(consumed, "frame-end octet is 0x" + to_hex(ByteView(buffer_).last(1)) + ", not 0xce");
    }
    WireReader in(buffer_);
    frame_.type = static_cast<FrameType>(in.u8());
    frame_.channel = in.u16();
    ByteView payload = ByteView(buffer_).subspan(kFrameHeaderSize, wanted_ - kFrameOverhead);
    frame_.payload.assign(payload.begin(), payload.end());
    buffer_.clear();
    wanted_ = 0;
    return {consumed, State::frame};
  }
  return {consumed, State::need_more};
}

Bytes encode_frame(FrameType type, std::uint16_t channel, ByteView payload) {
  Bytes out;
  out.reserve(payload.size() + kFrameOverhead);
  WireWriter w(out);
  w.u8(static_cast<std::uint8_t>(type));
  w.u16(channel);
  w.u32(static_cast<std::uint32_t>(payload.size()));
  w.bytes(payload);
  w.u8(kFrameEnd);
  return out;
}

Bytes encode_heartbeat() { return encode_frame(FrameType::heartbeat, 0, {}); }

}  // namespace firemq::amqp
