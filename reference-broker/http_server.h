// The HTTP listener of ports 15672 (ws) and 15671 (wss, inside TLS): HTTP/1.1 through Boost.Beast. Its one route
// so far is FireMQ's WebSocket endpoint, /fire ("ws://host:15672/fire"): an upgrade there becomes a FireMQ
// connection; any other path is 404 and is never upgraded. The management API (its own issue) adds routes here.
//
// Runs on the broker thread only. Requests are read under the handshake timeout, so a client that connects and
// sends nothing, or half a request, is closed.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/error.h"
#include "reference-broker/asio.h"
#include "reference-broker/http_routes.h"
#include "reference-broker/management_api.h"
#include "reference-broker/tls_context.h"
#include "reference-broker/transport.h"

namespace firemq {

struct HttpServerEnv {
  std::chrono::milliseconds handshake_timeout;
  WebSocketFaults faults;  // testing only
  // Hands an accepted WebSocket upgrade to the connection engine.
  std::function<void(std::unique_ptr<Transport>)> start_connection;
  ManagementApi* management = nullptr;  // /api/ and /metrics; none: 404 there too
};

// Serves one accepted HTTP connection (ws) or HTTPS connection (wss: the TLS handshake first). `env` and `tls`
// must outlive it.
void serve_http(asio::ip::tcp::socket socket, const HttpServerEnv& env);
void serve_https(asio::ip::tcp::socket socket, asio::ssl::context& tls, const HttpServerEnv& env);

}  // namespace firemq
