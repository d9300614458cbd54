// Connection URLs of the spec's "Transports" section: fire://, fires:// (TLS), ws:// and wss://.
//
//   fire://user:password@host:5673/vhost        vhost = the path without its leading /, percent-decoded
//   ws://user:password@host:15672/fire?vhost=v  path = the WebSocket endpoint, vhost = the vhost parameter
//
// Defaults: user and password guest; ports 5673 (fire), 5674 (fires), 15672 (ws), 15671 (wss); an empty path
// is vhost "/" for fire and fires and the endpoint "/fire" for ws and wss. Readings of what the spec leaves
// open (a path of "/", a user without a password, fragments) are in docs/spec-notes.md, "URLs".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/error.h"

namespace firemq {

struct Url {
  std::string scheme;      // "fire", "fires", "ws" or "wss", lower case
  bool tls = false;        // fires, wss
  bool websocket = false;  // ws, wss
  std::string host;        // without the brackets of an IPv6 literal
  std::uint16_t port = 0;
  std::string user;
  std::string password;
  std::string vhost;
  std::string path;  // the WebSocket endpoint; empty for fire and fires

  bool operator==(const Url&) const = default;
};

// Parses a connection URL; the error says what is wrong with it.
Result<Url, std::string> parse_url(std::string_view text);

// Why percent_decode refused: a % without its two hex digits, or a result that is not UTF-8.
struct PercentError {
  std::string reason;
};

// Decodes %XX escapes.
Result<std::string, PercentError> percent_decode(std::string_view text);
// RFC 3986 percent-encoding of everything but the unreserved characters (A-Z a-z 0-9 - . _ ~): a path segment
// that may hold '/', spaces or any byte (a vhost, a queue name in the management API's paths).
std::string percent_encode(std::string_view text);

}  // namespace firemq
