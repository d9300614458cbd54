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

std::size_t FrameDecoder::check_frame_header(ByteView header) {
  WireReader in(header);
  const std::uint8_t type = in.u8();
  in.u16();
  const std::uint32_t size = in.u32();
  if (type != 1 && type != 2 && type != 3 && type != 8) {
    error_ = connection_error(501, "unknown frame type " + std::to_string(type));
    return 0;
  }
  const std::uint64_t whole = std::uint64_t{size} + kFrameOverhead;
  if (frame_max_ != 0 && whole > frame_max_) {
    error_ = connection_error(501, "frame of " + std::to_string(whole) + " bytes is larger than frame-max " +
                                       std::to_string(frame_max_));
    return 0;
  }
  return static_cast<std::size_t>(whole);
}

bool FrameDecoder::take_whole_frame(ByteView whole) {
  if (whole.back() != kFrameEnd) {
    error_ = connection_error(501, "frame-end octet is 0x" + to_hex(whole.last(1)) + ", not 0xce");
    return false;
  }
  WireReader in(whole);
  frame_.type = static_cast<FrameType>(in.u8());
  frame_.channel = in.u16();
  frame_.payload = whole.subspan(kFrameHeaderSize, whole.size() - kFrameOverhead);
  return true;
}

FrameDecoder::Step FrameDecoder::feed(ByteView chunk) {
  if (header_pending_) return feed_protocol_header(chunk);
  if (buffered_frame_taken_) buffer_.clear(), buffered_frame_taken_ = false;
  // The hot path: a frame that starts here and ends inside the chunk is read where it lies.
  if (buffer_.empty() && chunk.size() >= kFrameHeaderSize) {
    const std::size_t whole = check_frame_header(chunk.first(kFrameHeaderSize));
    if (whole == 0) return {kFrameHeaderSize, State::error};
    if (whole <= chunk.size()) {
      if (!take_whole_frame(chunk.first(whole))) return {whole, State::error};
      return {whole, State::frame};
    }
  }
  // Otherwise the frame is gathered in buffer_ across chunks.
  std::size_t consumed = 0;
  while (consumed < chunk.size()) {
    const std::size_t target = wanted_ == 0 ? kFrameHeaderSize : wanted_;
    const std::size_t n = std::min(chunk.size() - consumed, target - buffer_.size());
    buffer_.insert(buffer_.end(), chunk.begin() + static_cast<std::ptrdiff_t>(consumed),
                   chunk.begin() + static_cast<std::ptrdiff_t>(consumed + n));
    consumed += n;
    if (buffer_.size() < target) break;
    if (wanted_ == 0) {
      wanted_ = check_frame_header(buffer_);
      if (wanted_ == 0) return {consumed, State::error};
      buffer_.reserve(wanted_);
      continue;
    }
    // frame_ borrows buffer_ until the next feed, which starts by letting it go.
    buffered_frame_taken_ = true;
    wanted_ = 0;
    if (!take_whole_frame(buffer_)) return {consumed, State::error};
    return {consumed, State::frame};
  }
  return {consumed, State::need_more};
}

Bytes encode_frame(FrameType type, std::uint16_t channel, ByteView payload) {
  Bytes out;
  out.reserve(payload.size() + kFrameOverhead);
  const std::size_t at = begin_frame(out, type, channel);
  out.insert(out.end(), payload.begin(), payload.end());
  end_frame(out, at);
  return out;
}

std::size_t begin_frame(Bytes& out, FrameType type, std::uint16_t channel) {
  const std::size_t at = out.size();
  WireWriter w(out);
  w.u8(static_cast<std::uint8_t>(type));
  w.u16(channel);
  w.u32(0);  // the payload's size, once it is written (end_frame)
  return at;
}

void end_frame(Bytes& out, std::size_t frame_at) {
  const auto size = static_cast<std::uint32_t>(out.size() - frame_at - kFrameHeaderSize);
  write_u32_be(out.data() + frame_at + 3, size);  // after the type and the channel
  out.push_back(kFrameEnd);
}

Bytes encode_heartbeat() { return encode_frame(FrameType::heartbeat, 0, {}); }

}  // namespace firemq::amqp
