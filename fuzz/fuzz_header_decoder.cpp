// Fuzzes every op's header decoder. A header that decodes must encode and decode again to the same message, and
// decode_header (which reads common headers straight from their bytes) must agree with decode_header_generic (which
// reads every header through a Value map) on every input: the same message, or the same error.
//
// Input layout: byte 0 is the op code (any byte: the 27 ops and the undefined ones); the rest is the header.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "protocol/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const firemq::ByteView header(data + 1, size - 1);
  firemq::Result<firemq::Message> message = firemq::decode_header(data[0], header);
  firemq::Result<firemq::Message> generic = firemq::decode_header_generic(data[0], header);
  if (message.ok() != generic.ok()) std::abort();
  if (message.ok() && !(*message == *generic)) std::abort();
  if (!message.ok() && !(message.error() == generic.error())) std::abort();
  if (!message.ok()) {
    const firemq::Error& e = message.error();
    if (e.code != 502 && e.code != 540) std::abort();  // a header can only be malformed or of an unknown op
    if (e.msg.empty()) std::abort();
    return 0;
  }
  const firemq::Bytes again = firemq::encode_header(*message);
  firemq::Result<firemq::Message> back = firemq::decode_header(data[0], again);
  if (!back.ok() || !(*back == *message)) std::abort();
  return 0;
}
