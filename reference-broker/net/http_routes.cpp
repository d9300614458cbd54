#include "reference-broker/net/http_routes.h"

#include <algorithm>
#include <cctype>

#include <boost/beast/websocket/rfc6455.hpp>

#include "protocol/url.h"

namespace firemq {
namespace {

namespace http = boost::beast::http;

std::string_view target_of(const HttpRequest& request) {
  return std::string_view(request.target().data(), request.target().size());
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

// RFC 6455 4.1: "a base64-encoded value that, when decoded, is 16 bytes in length", so 22 base64 digits and
// "==". Beast checks only that the header is present and not too long.
bool valid_websocket_key(const HttpRequest& request) {
  const auto key = request[http::field::sec_websocket_key];
  if (key.size() != 24 || key.substr(22) != "==") return false;
  return std::all_of(key.begin(), key.begin() + 22,
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/'; });
}

HttpAnswer refuse(http::status status, std::string text) {
  HttpAnswer answer;
  answer.status = status;
  answer.text = std::move(text);
  return answer;
}

}  // namespace

HttpAnswer route_http_request(const HttpRequest& request) {
  const std::string_view target = target_of(request);
  if (path_of(target) != kWebSocketPath) {
    return refuse(http::status::not_found,
                  "no such path: FireMQ's WebSocket endpoint is " + std::string(kWebSocketPath));
  }
  if (!boost::beast::websocket::is_upgrade(request)) {
    return refuse(http::status::upgrade_required,
                  "this is FireMQ's WebSocket endpoint: connect with a WebSocket client");
  }
  if (!valid_websocket_key(request)) {
    return refuse(http::status::bad_request, "bad Sec-WebSocket-Key: RFC 6455 wants the base64 of 16 random bytes");
  }
  auto vhost = vhost_parameter(target);
  if (!vhost) return refuse(http::status::bad_request, "bad ?vhost= parameter: " + vhost.error());
  // The rest of the upgrade (version 13, the headers) is checked by Beast when the transport accepts it.
  // The transport adds the peer's address, http_server the Origin's verdict.
  HttpAnswer answer;
  answer.upgrade = true;
  answer.hints = TransportHints{*vhost, std::nullopt, std::nullopt};
  answer.status = http::status::switching_protocols;
  return answer;
}

Result<std::optional<std::string>, std::string> vhost_parameter(std::string_view target) {
  const std::size_t question = target.find('?');
  if (question == std::string_view::npos) return std::optional<std::string>();
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) != "vhost") continue;
    auto decoded = percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!decoded) return decoded.error().reason;
    if (decoded->empty()) return std::optional<std::string>();  // ?vhost= with no value names no vhost
    return std::optional<std::string>(std::move(*decoded));
  }
  return std::optional<std::string>();
}

}  // namespace firemq
