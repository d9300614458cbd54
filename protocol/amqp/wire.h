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
  // A short string borrowed from the bytes read (the hot path's names, copied only where they are kept).
  std::string_view shortstr_view() {
    const ByteView b = take(u8());
    return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
  }
  std::string longstr() { return text(take(u32())); }

  bool failed() const { return failed_; }
  bool at_end() const { return bytes_.empty(); }
  std::size_t remaining() const { return bytes_.size(); }

 private:
  static std::string text(ByteView b) { return std::string(b.begin(), b.end()); }
  // Inline: every integer field of every frame comes through here.
  std::uint64_t take_be(std::size_t n) {
    if (failed_ || n > bytes_.size()) {
      failed_ = true;
      return 0;
    }
    const std::uint64_t v = read_be(bytes_.data(), n);
    bytes_ = bytes_.subspan(n);
    return v;
  }

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
  // Inline, with one growth check for the n bytes rather than n: every integer the broker writes comes through here.
  void put_be(std::uint64_t v, int n) {
    const std::size_t at = out_.size();
    out_.resize(at + static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      out_[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * (n - 1 - i)));
  }
  Bytes& out_;
};

}  // namespace firemq::amqp
