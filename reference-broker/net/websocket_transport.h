// The WebSocket transports of the spec's "Transports" table: ws:// (port 15672) and wss:// (port 15671, the same
// inside TLS), at the path /fire. "One binary WebSocket message per frame, without the length prefix and without
// FMQ1." Boost.Beast speaks WebSocket; this adapter only cuts messages into frames and applies the frame limits
// to them as they arrive (a message larger than the limit is refused before it is all read).
//
// The HTTP upgrade request has been read by http_server.cpp; the transport's open() answers it.
#pragma once

#include <memory>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "reference-broker/core/config.h"
#include "reference-broker/net/asio.h"
#include "reference-broker/net/http_routes.h"
#include "reference-broker/net/transport.h"

namespace firemq {

namespace beast = boost::beast;
using TlsHttpStream = beast::ssl_stream<beast::tcp_stream>;

// `hints.url_vhost` is the request's ?vhost=, percent-decoded. `handshake_timeout` bounds the upgrade's reply.
// `faults` are for testing only (config.h).
std::unique_ptr<Transport> make_ws_transport(beast::tcp_stream stream, HttpRequest upgrade, TransportHints hints,
                                             std::chrono::milliseconds handshake_timeout, WebSocketFaults faults = {});
std::unique_ptr<Transport> make_wss_transport(TlsHttpStream stream, HttpRequest upgrade, TransportHints hints,
                                              std::chrono::milliseconds handshake_timeout, WebSocketFaults faults = {});

}  // namespace firemq
