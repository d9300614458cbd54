#include "harness/client/websocket_framing.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <random>

namespace firemq::conform {
namespace {

constexpr std::string_view kAcceptGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
constexpr std::size_t kMaxControlPayload = 125;  // 5.5

}  // namespace

Bytes encode_ws_frame(bool fin, std::uint8_t opcode, ByteView payload,
                      std::optional<std::array<std::uint8_t, 4>> mask) {
  Bytes out;
  out.reserve(payload.size() + 14);
  out.push_back(static_cast<std::uint8_t>((fin ? 0x80 : 0x00) | (opcode & 0x0f)));
  const std::uint8_t mask_bit = mask ? 0x80 : 0x00;
  const std::uint64_t n = payload.size();
  if (n <= 125) {
    out.push_back(static_cast<std::uint8_t>(mask_bit | n));
  } else if (n <= 0xffff) {  // "the minimal number of bytes MUST be used to encode the length"
    out.push_back(mask_bit | 126);
    out.push_back(static_cast<std::uint8_t>(n >> 8));
    out.push_back(static_cast<std::uint8_t>(n));
  } else {
    out.push_back(mask_bit | 127);
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(n >> shift));
  }
  if (!mask) {
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
  }
  out.insert(out.end(), mask->begin(), mask->end());
  for (std::size_t i = 0; i < payload.size(); ++i) out.push_back(payload[i] ^ (*mask)[i % 4]);
  return out;
}

std::array<std::uint8_t, 4> random_mask() {
  std::array<std::uint8_t, 4> mask{};
  if (RAND_bytes(mask.data(), static_cast<int>(mask.size())) != 1) {
    thread_local std::mt19937 fallback{std::random_device{}()};
    for (auto& b : mask) b = static_cast<std::uint8_t>(fallback());
  }
  return mask;
}

// Parser -----------------------------------------------------------------------------------------------------

std::size_t WsFrameParser::head_size() const {
  const std::uint8_t len7 = head_[1] & 0x7f;
  const std::size_t extended = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
  return 2 + extended + ((head_[1] & 0x80) ? 4 : 0);
}

WsFrameParser::Step WsFrameParser::fail(std::size_t consumed, std::string why) {
  error_ = std::move(why);
  stage_ = Stage::failed;
  return {consumed, State::error};
}

WsFrameParser::Step WsFrameParser::feed(ByteView chunk) {
  std::size_t used = 0;
  if (stage_ == Stage::failed) return {0, State::error};
  if (stage_ == Stage::ready) return {0, State::frame};
  while (stage_ == Stage::head && used < chunk.size()) {
    head_.push_back(chunk[used++]);
    if (head_.size() < 2 || head_.size() < head_size()) continue;
    // The whole header is in: decode it, and check the length before allocating.
    frame_ = WsFrame{};
    frame_.fin = (head_[0] & 0x80) != 0;
    frame_.opcode = head_[0] & 0x0f;
    frame_.masked = (head_[1] & 0x80) != 0;
    if ((head_[0] & 0x70) != 0) return fail(used, "a frame with RSV bits set and no extension negotiated");
    std::uint64_t n = head_[1] & 0x7f;
    const std::size_t extended = n == 126 ? 2 : n == 127 ? 8 : 0;
    if (extended > 0) {
      n = 0;
      for (std::size_t i = 0; i < extended; ++i) n = (n << 8) | head_[2 + i];
    }
    if (frame_.masked) std::copy_n(head_.end() - 4, 4, mask_.begin());
    if (is_control(frame_.opcode) && (n > kMaxControlPayload || !frame_.fin)) {
      return fail(used, "a control frame that is fragmented or longer than 125 bytes");
    }
    if (n > max_payload_) {
      return fail(used,
                  "a frame of " + std::to_string(n) + " bytes, over the limit of " + std::to_string(max_payload_));
    }
    payload_expected_ = static_cast<std::size_t>(n);
    frame_.payload.reserve(payload_expected_);
    head_.clear();
    stage_ = Stage::payload;
  }
  if (stage_ == Stage::payload) {
    const std::size_t take = std::min(chunk.size() - used, payload_expected_ - frame_.payload.size());
    frame_.payload.insert(frame_.payload.end(), chunk.begin() + static_cast<std::ptrdiff_t>(used),
                          chunk.begin() + static_cast<std::ptrdiff_t>(used + take));
    used += take;
    if (frame_.payload.size() == payload_expected_) {
      if (frame_.masked) {
        for (std::size_t i = 0; i < frame_.payload.size(); ++i) frame_.payload[i] ^= mask_[i % 4];
      }
      stage_ = Stage::ready;
    }
  }
  return {used, stage_ == Stage::ready ? State::frame : State::need_more};
}

WsFrame WsFrameParser::take_frame() {
  stage_ = Stage::head;
  return std::move(frame_);
}

// Messages ---------------------------------------------------------------------------------------------------

WsMessageAssembler::Outcome WsMessageAssembler::add(WsFrame frame) {
  if (is_control(frame.opcode)) return Control{std::move(frame)};
  const auto opcode = static_cast<WsOpcode>(frame.opcode);
  if (opcode == WsOpcode::continuation) {
    if (!opcode_) return Error{"a continuation frame with no message to continue"};
  } else if (opcode == WsOpcode::text || opcode == WsOpcode::binary) {
    if (opcode_) return Error{"a new data frame before the previous message's last fragment"};
    opcode_ = opcode;
    data_.clear();
  } else {
    return Error{"a frame with the reserved opcode " + std::to_string(frame.opcode)};
  }
  if (data_.size() + frame.payload.size() > max_message_) {
    return Error{"a message over the limit of " + std::to_string(max_message_) + " bytes"};
  }
  data_.insert(data_.end(), frame.payload.begin(), frame.payload.end());
  if (!frame.fin) return Incomplete{};
  Message done{*opcode_, std::move(data_)};
  opcode_.reset();
  data_ = Bytes{};
  return done;
}

WsClose parse_close_payload(ByteView payload) {
  if (payload.size() < 2) return {};
  const auto code = static_cast<std::uint16_t>((payload[0] << 8) | payload[1]);
  return {code, std::string(payload.begin() + 2, payload.end())};
}

Bytes close_payload(std::uint16_t code, std::string_view reason) {
  Bytes out;
  out.reserve(2 + reason.size());
  out.push_back(static_cast<std::uint8_t>(code >> 8));
  out.push_back(static_cast<std::uint8_t>(code));
  for (const char c : reason) out.push_back(static_cast<std::uint8_t>(c));
  return out;
}

std::string base64_encode(ByteView bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string websocket_accept_for(std::string_view key) {
  std::string text(key);
  text += kAcceptGuid;
  std::array<std::uint8_t, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha1(), nullptr);
  return base64_encode(ByteView(digest.data(), size));
}

}  // namespace firemq::conform
