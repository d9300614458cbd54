// Fuzzes the front of the HTTP listener (ws and wss): arbitrary bytes through Beast's request parser with the
// listener's bounds, then the routing decision (path, upgrade, Sec-WebSocket-Key, ?vhost=). Nothing may crash
// or trip a sanitizer, and only a well-formed upgrade of /fire may become a FireMQ connection.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <boost/asio/buffer.hpp>

#include "reference-broker/net/http_routes.h"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(firemq::kMaxRequestHeaderBytes);
  parser.body_limit(firemq::kMaxRequestBodyBytes);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (ec || !parser.is_done()) return 0;
  const firemq::HttpRequest& request = parser.get();
  const firemq::HttpAnswer answer = firemq::route_http_request(request);
  if (answer.upgrade) {
    const std::string_view target(request.target().data(), request.target().size());
    if (target.substr(0, target.find('?')) != firemq::kWebSocketPath) std::abort();
    if (request[http::field::sec_websocket_key].size() != 24) std::abort();
  }
  return 0;
}
