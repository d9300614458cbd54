#include "reference-broker/core/log.h"

#include <cstdio>
#include <iostream>

namespace firemq {

std::string printable(std::string_view peer_text, std::size_t max_bytes) {
  std::string out;
  const std::string_view kept = peer_text.substr(0, max_bytes);
  for (unsigned char c : kept) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  if (kept.size() < peer_text.size()) out += "...";
  return out;
}

void log_line(const std::string& text) { std::cerr << "firemq-broker: " << text << std::endl; }

void log_notice(const std::string& text) { std::cout << "firemq-broker: " << text << std::endl; }

void log_refused_login(std::string_view step, int code, const std::optional<std::string>& peer_address,
                       std::string_view user, std::string_view reason) {
  // What the peer chose is bounded and escaped.
  log_line(std::string(step) + " refused (" + std::to_string(code) + ") from " +
           peer_address.value_or("no network peer") + ", user '" + printable(user) + "': " + printable(reason, 256));
}

}  // namespace firemq
