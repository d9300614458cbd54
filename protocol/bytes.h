// Byte buffers and the big-endian integers of the frame layout ("All integers in framing are big-endian").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace firemq {

using Bytes = std::vector<std::uint8_t>;
using ByteView = std::span<const std::uint8_t>;

inline std::uint32_t read_u32_be(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

// An unsigned big-endian integer of `n` bytes (at most 8).
inline std::uint64_t read_be(const std::uint8_t* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

inline void append_u32_be(Bytes& out, std::uint32_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 24));
  out.push_back(static_cast<std::uint8_t>(v >> 16));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}

inline void write_u32_be(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

inline ByteView as_bytes(std::string_view s) { return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}; }

// Lower-case hex, two digits a byte, as the vector files write bytes.
std::string to_hex(ByteView bytes);
// The bytes of a hex string (either case); nullopt for an odd length or a non-hex character.
std::optional<Bytes> from_hex(std::string_view hex);
// RFC 4648 base64 with padding: binary values in plain JSON, HTTP basic auth.
std::string to_base64(ByteView bytes);
// The bytes of padded base64; nullopt for a length that is not a multiple of 4, a character outside the alphabet,
// or padding anywhere but in the last two places.
std::optional<Bytes> from_base64(std::string_view text);

}  // namespace firemq
