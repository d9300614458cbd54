// Fuzzes the connection URL parser. A URL that parses has a known scheme, a host, a port in range, a vhost,
// and for WebSocket an endpoint path.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/url.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto url = firemq::parse_url(text);
  if (!url.ok()) {
    if (url.error().empty()) std::abort();  // every refusal says what is wrong
    return 0;
  }
  if (url->host.empty() || url->port == 0 || url->vhost.empty()) std::abort();
  if (url->websocket != url->path.starts_with("/")) std::abort();
  if (url->scheme != "fire" && url->scheme != "fires" && url->scheme != "ws" && url->scheme != "wss") std::abort();
  return 0;
}
