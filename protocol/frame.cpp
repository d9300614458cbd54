#include "protocol/frame.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "protocol/reply_codes.h"

namespace firemq {
namespace {

Error frame_error(std::string msg) { return make_error(ReplyCode::frame_error, std::move(msg)); }

std::string too_large(std::size_t size, std::size_t max_frame) {
  return "frame of " + std::to_string(size) + " bytes exceeds the limit of " + std::to_string(max_frame) + " bytes";
}

// The preamble as printable text for an error message: peer bytes are shown bounded and sanitised.
std::string printable(const std::uint8_t* bytes, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = static_cast<char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[bytes[i] >> 4];
      out += kHex[bytes[i] & 0xf];
    }
  }
  return out;
}

}  // namespace

Status check_frame_body(ByteView body, std::size_t max_frame) {
  const std::size_t size = kLenSize + body.size();
  if (size > max_frame) return frame_error(too_large(size, max_frame));
  if (body.size() < kFixedSize) {
    return frame_error("frame too short: len is " + std::to_string(body.size()) +
                       ", at least 5 is needed for op and hlen");
  }
  const std::size_t hlen = read_u32_be(body.data() + 1);
  if (hlen > body.size() - kFixedSize) {
    return frame_error("hlen " + std::to_string(hlen) + " runs past the end of the frame (" +
                       std::to_string(body.size() - kFixedSize) + " bytes left after op and hlen)");
  }
  return std::nullopt;
}

FrameDecoder::FrameDecoder(StreamSide side, std::size_t max_frame)
    : stage_(side == StreamSide::server ? Stage::preamble : Stage::len), max_frame_(max_frame) {}

FrameDecoder::Step FrameDecoder::feed(ByteView chunk) {
  std::size_t consumed = 0;
  while (true) {
    switch (stage_) {
      case Stage::frame_ready: return {consumed, State::frame};
      case Stage::failed: return {consumed, State::error};
      default: break;
    }
    if (consumed == chunk.size()) return {consumed, State::need_more};
    const ByteView rest = chunk.subspan(consumed);
    if (stage_ == Stage::preamble) {
      consumed += feed_preamble(rest);
    } else if (stage_ == Stage::len) {
      consumed += feed_len(rest);
    } else {
      consumed += feed_body(rest);
    }
  }
}

std::size_t FrameDecoder::feed_preamble(ByteView chunk) {
  const std::size_t n = std::min(chunk.size(), kPreamble.size() - prefix_filled_);
  std::memcpy(prefix_ + prefix_filled_, chunk.data(), n);
  prefix_filled_ += n;
  // Compare what has arrived so far, so that "HTTP" or "AMQP" fails at its first byte, not its fourth.
  if (std::memcmp(prefix_, kPreamble.data(), prefix_filled_) != 0) {
    fail("expected the preamble \"FMQ1\", got \"" + printable(prefix_, prefix_filled_) + "\"");
  } else if (prefix_filled_ == kPreamble.size()) {
    prefix_filled_ = 0;
    stage_ = Stage::len;
  }
  return n;
}

std::size_t FrameDecoder::feed_len(ByteView chunk) {
  const std::size_t n = std::min(chunk.size(), kLenSize - prefix_filled_);
  std::memcpy(prefix_ + prefix_filled_, chunk.data(), n);
  prefix_filled_ += n;
  if (prefix_filled_ < kLenSize) return n;
  prefix_filled_ = 0;
  const std::size_t len = read_u32_be(prefix_);
  // Both checks come from len alone, before anything is allocated for the frame.
  if (kLenSize + len > max_frame_) {
    fail(too_large(kLenSize + len, max_frame_));
  } else if (len < kFixedSize) {
    fail("frame too short: len is " + std::to_string(len) + ", at least 5 is needed for op and hlen");
  } else {
    body_expected_ = len;
    body_.clear();
    body_.reserve(len);
    stage_ = Stage::body;
  }
  return n;
}

std::size_t FrameDecoder::feed_body(ByteView chunk) {
  const std::size_t n = std::min(chunk.size(), body_expected_ - body_.size());
  body_.insert(body_.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n));
  if (body_.size() < body_expected_) return n;
  if (Status bad = check_frame_body(body_, max_frame_)) {
    error_ = std::move(*bad);
    stage_ = Stage::failed;
  } else {
    stage_ = Stage::frame_ready;
  }
  return n;
}

RawFrame FrameDecoder::take_frame() {
  stage_ = Stage::len;
  return RawFrame(std::move(body_));
}

Status FrameDecoder::finish() const {
  switch (stage_) {
    case Stage::failed: return error_;
    case Stage::len:
      if (prefix_filled_ == 0) return std::nullopt;
      return frame_error("stream ended inside a frame's len field (" + std::to_string(prefix_filled_) + " of 4 bytes)");
    case Stage::body:
      return frame_error("truncated frame: the stream ended after " + std::to_string(body_.size()) + " of " +
                         std::to_string(body_expected_) + " bytes");
    case Stage::preamble:
      if (prefix_filled_ == 0) return std::nullopt;
      return frame_error("stream ended inside the preamble");
    case Stage::frame_ready: return std::nullopt;
  }
  return std::nullopt;
}

void FrameDecoder::fail(std::string msg) {
  error_ = frame_error(std::move(msg));
  stage_ = Stage::failed;
}

Result<RawFrame> decode_message_frame(ByteView message, std::size_t max_frame) {
  if (Status bad = check_frame_body(message, max_frame)) return std::move(*bad);
  return RawFrame(Bytes(message.begin(), message.end()));
}

namespace {

void append_body(Bytes& out, std::uint8_t op, ByteView header, ByteView payload) {
  out.push_back(op);
  append_u32_be(out, static_cast<std::uint32_t>(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), payload.begin(), payload.end());
}

}  // namespace

Bytes frame_stream(std::uint8_t op, ByteView header, ByteView payload) {
  Bytes out;
  out.reserve(kMinFrameSize + header.size() + payload.size());
  append_u32_be(out, static_cast<std::uint32_t>(kFixedSize + header.size() + payload.size()));
  append_body(out, op, header, payload);
  return out;
}

Bytes frame_message(std::uint8_t op, ByteView header, ByteView payload) {
  Bytes out;
  out.reserve(kFixedSize + header.size() + payload.size());
  append_body(out, op, header, payload);
  return out;
}

}  // namespace firemq
