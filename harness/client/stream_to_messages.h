// Turns the bytes of the TCP framing (an optional FMQ1 preamble, then len-prefixed frames) into the
// WebSocket framing (one message per frame, without len and without FMQ1), so that a case written as TCP
// bytes (send_raw) runs over ws:// and wss:// as well. Bytes are held until their frame is complete: a frame
// sent in pieces leaves as one message.
//
// What has no WebSocket equivalent is refused, with a reason: a preamble other than FMQ1, a len too small
// for op and hlen, or one too large to be a frame anyone sends. A case that sends such bytes is stream-only
// ("transports": ["fire", "fires"], docs/case-format.md).
#pragma once

#include <string>
#include <vector>

#include "protocol/bytes.h"
#include "protocol/error.h"

namespace firemq::conform {

class StreamToMessages {
 public:
  // The messages the bytes complete (none while a frame is still partial), or why they cannot be translated.
  Result<std::vector<Bytes>, std::string> feed(ByteView bytes);
  // Bytes held back: the start of a frame whose end has not been sent yet.
  std::size_t pending() const { return buffer_.size(); }

 private:
  bool at_start_ = true;  // nothing sent yet: FMQ1 may come first
  Bytes buffer_;
};

}  // namespace firemq::conform
