#include "protocol/amqp/wire.h"

#include <algorithm>

namespace firemq::amqp {

ByteView WireReader::take(std::size_t n) {
  if (failed_ || n > bytes_.size()) {
    failed_ = true;
    return {};
  }
  ByteView taken = bytes_.first(n);
  bytes_ = bytes_.subspan(n);
  return taken;
}

void WireWriter::shortstr(std::string_view s) {
  s = s.substr(0, std::min<std::size_t>(s.size(), 255));
  u8(static_cast<std::uint8_t>(s.size()));
  bytes(as_bytes(s));
}

void WireWriter::longstr(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  bytes(as_bytes(s));
}

std::size_t WireWriter::begin_length() {
  const std::size_t at = out_.size();
  u32(0);
  return at;
}

void WireWriter::end_length(std::size_t at) {
  const auto length = static_cast<std::uint32_t>(out_.size() - at - 4);
  for (int i = 0; i < 4; ++i) out_[at + i] = static_cast<std::uint8_t>(length >> (24 - 8 * i));
}

}  // namespace firemq::amqp
