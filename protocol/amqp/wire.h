// The primitive types of AMQP 0-9-1's wire format (the spec's section 4.2.5, "Field types"): big-endian
// integers, short strings (u8 length) and long strings (u32 length). No I/O.
//
// WireReader never reads past its bytes: a read past the end yields zero values and marks the reader failed,
// so a decoder reads every field first and checks `failed()` once, which keeps decoders short.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/bytes.h"

namespace firemq::amqp {

class WireReader {
 public:
  explicit WireReader(ByteView bytes) : bytes_(bytes) {}

  std::uint8_t u8() { return static_cast<std::uint8_t>(take_be(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(take_be(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(take_be(4)); }
  std::uint64_t u64() { return take_be(8); }
  // `n` bytes, or an empty view (and failed) when fewer remain.
  ByteView take(std::size_t n);
  std::string shortstr() { return text(take(u8())); }
  std::string longstr() { return text(take(u32())); }

  bool failed() const { return failed_; }
  bool at_end() const { return bytes_.empty(); }
  std::size_t remaining() const { return bytes_.size(); }

 private:
  static std::string text(ByteView b) { return std::string(b.begin(), b.end()); }
  std::uint64_t take_be(std::size_t n);

  ByteView bytes_;
  bool failed_ = false;
};

// Appends big-endian integers and strings.
class WireWriter {
 public:
  explicit WireWriter(Bytes& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) { put_be(v, 2); }
  void u32(std::uint32_t v) { put_be(v, 4); }
  void u64(std::uint64_t v) { put_be(v, 8); }
  void bytes(ByteView b) { out_.insert(out_.end(), b.begin(), b.end()); }
  // AMQP's shortstr holds at most 255 bytes; longer text is cut to 255 (the broker's own strings never are
  // that long; a peer's names are checked when decoded).
  void shortstr(std::string_view s);
  void longstr(std::string_view s);
  std::size_t size() const { return out_.size(); }
  // Writes a u32 placeholder now and fills it with the number of bytes written after it (tables, arrays).
  std::size_t begin_length();
  void end_length(std::size_t at);

 private:
  void put_be(std::uint64_t v, int n);
  Bytes& out_;
};

}  // namespace firemq::amqp
