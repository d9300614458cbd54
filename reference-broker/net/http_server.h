// The HTTP listener of ports 15672 (ws) and 15671 (wss, inside TLS): HTTP/1.1 through Boost.Beast. Its one route
// so far is FireMQ's WebSocket endpoint, /fire ("ws://host:15672/fire"): an upgrade there becomes a FireMQ
// connection; any other path is 404 and is never upgraded, unless the HttpApplication the broker hands in (the
// management API and UI) serves it.
//
// Runs on the broker thread only. A connection that is waiting for a request (from accept, through TLS, to a
// complete request; and again between keep-alive requests) is in the broker-wide handshake list with FireMQ's and
// AMQP's (--max-handshakes: the longest waiting is dropped), and has deadlines: the first request complete within
// the handshake timeout, then an idle keep-alive connection closed after kHttpIdleTimeout without a byte (as
// cowboy's idle_timeout in RabbitMQ's management plugin). So sockets that send nothing, half a request, or sit
// idle after an answer hold at most the bound's share of descriptors, and not for long.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/error.h"
#include "reference-broker/net/asio.h"
#include "reference-broker/net/connection.h"
#include "reference-broker/net/http_routes.h"
#include "reference-broker/net/tls_context.h"
#include "reference-broker/net/transport.h"

namespace firemq {

// What answers the requests that are not WebSocket upgrades: the management API and UI, which the broker hands
// in (net does not know them).
class HttpApplication {
 public:
  virtual ~HttpApplication() = default;
  // Whether a request target is the application's; other targets are http_routes' (404 but /fire).
  virtual bool serves(std::string_view target) const = 0;
  virtual HttpAnswer handle(const HttpRequest& request, const std::optional<std::string>& peer_address) = 0;
};

struct HttpServerEnv {
  std::chrono::milliseconds handshake_timeout;
  WebSocketFaults faults;  // testing only
  // Hands an accepted WebSocket upgrade to the connection engine.
  std::function<void(std::unique_ptr<Transport>)> start_connection;
  HttpApplication* application = nullptr;  // the management API and UI; none: 404 there too
  // The broker-wide handshake list (--max-handshakes) a waiting HTTP connection joins; none: unbounded (tests).
  ConnectionRegistry* handshakes = nullptr;
  // Whose WebSocket upgrades count as from this machine (--trusted-origins); none: every Origin is trusted.
  const OriginPolicy* trusted_origins = nullptr;
};

// Serves one accepted HTTP connection (ws) or HTTPS connection (wss: the TLS handshake first). `env` and `tls`
// must outlive it.
void serve_http(asio::ip::tcp::socket socket, const HttpServerEnv& env);
void serve_https(asio::ip::tcp::socket socket, asio::ssl::context& tls, const HttpServerEnv& env);

}  // namespace firemq
