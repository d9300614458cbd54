// MessagePack <-> Value, through msgpack-cxx. Decoding never throws and never trusts a declared length:
// every error is a 502 syntax-error Error that says what was wrong.
#pragma once

#include <cstddef>

#include "protocol/bytes.h"
#include "protocol/error.h"
#include "protocol/value.h"

namespace firemq {

// Arrays and maps nested deeper than this are refused (502), so that a peer cannot exhaust the stack with
// a few bytes of 0x91 0x91 0x91 ... A reference-broker limit, not a spec rule.
inline constexpr std::size_t kMaxNesting = 64;

// A value made of more items than this is refused (502): each decoded item takes tens of bytes, so a 16 MiB
// frame of one-byte items would otherwise become over half a gigabyte. A reference-broker limit.
inline constexpr std::size_t kMaxItems = 65536;

// Decodes `bytes`, which must hold exactly one MessagePack value (no trailing bytes).
Result<Value> decode_value(ByteView bytes);

// Appends the MessagePack encoding of `value` to `out`, in the smallest format for each item.
void encode_value(const Value& value, Bytes& out);
void encode_map(const Map& map, Bytes& out);

// A stream for msgpack::packer that appends to a Bytes.
struct ByteSink {
  Bytes& out;
  void write(const char* data, std::size_t size) {
    out.insert(out.end(), reinterpret_cast<const std::uint8_t*>(data),
               reinterpret_cast<const std::uint8_t*>(data) + size);
  }
};

}  // namespace firemq
