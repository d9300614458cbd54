#include "harness/client/stream_to_messages.h"

#include <algorithm>

#include "protocol/frame.h"

namespace firemq::conform {
namespace {

// Larger than any frame a case sends (welcome.max_frame + a few bytes): a len beyond it is a case probing
// the len field itself (the bytes "AMQP" read as a len, say), which WebSocket has no way to say.
constexpr std::size_t kMaxTranslatedLen = 256 * 1024 * 1024;

}  // namespace

Result<std::vector<Bytes>, std::string> StreamToMessages::feed(ByteView bytes) {
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  if (at_start_) {
    // The preamble has no WebSocket counterpart: dropped. Wait until 4 bytes tell whether it is there.
    const std::size_t n = std::min(buffer_.size(), kPreamble.size());
    const bool preamble_so_far = std::equal(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(n),
                                            kPreamble.begin());
    if (preamble_so_far && n < kPreamble.size()) return std::vector<Bytes>{};
    if (preamble_so_far)
      buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(kPreamble.size()));
    at_start_ = false;
  }
  std::vector<Bytes> messages;
  std::size_t at = 0;
  while (buffer_.size() - at >= kLenSize) {
    const std::size_t len = read_u32_be(buffer_.data() + at);
    if (len < kFixedSize) {
      return "len " + std::to_string(len) + " leaves no room for op and hlen: a WebSocket message cannot say that";
    }
    if (len > kMaxTranslatedLen) {
      return "len " + std::to_string(len) + " (bytes " + to_hex(ByteView(buffer_).subspan(at, kLenSize)) +
             ") is no frame a WebSocket message could carry";
    }
    if (buffer_.size() - at - kLenSize < len) break;
    const auto body = buffer_.begin() + static_cast<std::ptrdiff_t>(at + kLenSize);
    messages.emplace_back(body, body + static_cast<std::ptrdiff_t>(len));
    at += kLenSize + len;
  }
  buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(at));
  return messages;
}

}  // namespace firemq::conform
