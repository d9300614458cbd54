// What the HTTP listener answers to a request, decided without I/O (http_server.cpp carries it out, and
// fuzz_http_request feeds it what Beast parsed from arbitrary bytes). The one route so far is FireMQ's WebSocket
// endpoint, /fire; the management API (its own issue) adds its routes here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>

#include "protocol/error.h"
#include "reference-broker/session/handshake.h"

namespace firemq {

inline constexpr std::string_view kWebSocketPath = "/fire";
// Bounds on what one request may hold before Beast refuses it.
inline constexpr std::uint32_t kMaxRequestHeaderBytes = 8 * 1024;
inline constexpr std::uint64_t kMaxRequestBodyBytes = 1024 * 1024;

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

struct HttpAnswer {
  bool upgrade = false;  // hand the request to the WebSocket transport, with `hints`
  TransportHints hints;
  boost::beast::http::status status = boost::beast::http::status::ok;  // when not upgraded
  std::string text;                                                    // the response body
  std::string content_type = "text/plain; charset=utf-8";
  bool ask_for_credentials = false;  // 401: WWW-Authenticate: Basic (the management API)
  // The page's own Content-Security-Policy; empty: one that allows nothing (http_server.cpp).
  std::string content_security_policy;
};

HttpAnswer route_http_request(const HttpRequest& request);

// The `vhost` parameter of a request target's query, percent-decoded: absent when the query has none or it is
// empty; an error when its escapes are broken. Other parameters are ignored (docs/spec-notes.md, "URLs").
Result<std::optional<std::string>, std::string> vhost_parameter(std::string_view target);

}  // namespace firemq
