#include "harness/model/transport.h"

namespace firemq::conform {

std::string_view transport_name(Transport t) {
  switch (t) {
    case Transport::fire: return "fire";
    case Transport::fires: return "fires";
    case Transport::ws: return "ws";
    case Transport::wss: return "wss";
  }
  return "fire";
}

std::optional<Transport> transport_from_name(std::string_view name) {
  for (Transport t : kAllTransports) {
    if (transport_name(t) == name) return t;
  }
  return std::nullopt;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0x0f];
    }
  }
  return out;
}

}  // namespace firemq::conform
