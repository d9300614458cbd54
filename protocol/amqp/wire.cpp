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

std::uint64_t WireReader::take_be(std::size_t n) {
  std::uint64_t v = 0;
  for (std::uint8_t b : take(n)) v = (v << 8) | b;
  return v;
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

void WireWriter::put_be(std::uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

}  // namespace firemq::amqp
