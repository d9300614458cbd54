// The stream transports of the spec's "Transports" table: TCP (fire://, port 5673) and TLS (fires://, port 5674,
// "As TCP, inside TLS"). The client sends FMQ1, then length-prefixed frames; FrameDecoder cuts them. Over TLS the
// preamble is sent inside TLS (docs/spec-notes.md, "FMQ1 over TLS"). AMQP 0-9-1 (amqp://, port 5672) is a TCP
// stream too: its bytes go to AMQP's own decoder (Transport::unread_bytes).
#pragma once

#include <memory>

#include "reference-broker/net/asio.h"
#include "reference-broker/net/tls_context.h"
#include "reference-broker/net/transport.h"

namespace firemq {

// `scheme` names what is spoken over it (Transport::scheme): a string literal.
std::unique_ptr<Transport> make_tcp_transport(asio::ip::tcp::socket socket, std::string_view scheme = "fire");
// The TLS handshake is the transport's open(), under the engine's handshake deadline.
std::unique_ptr<Transport> make_tls_transport(asio::ip::tcp::socket socket, asio::ssl::context& tls,
                                              std::string_view scheme = "fires");

// "peer:port -> local:port", as RabbitMQ names connections.
std::string describe_endpoints(const asio::basic_socket<asio::ip::tcp>& socket);
// The peer's IP address in text (TransportHints::peer_address), or "unknown" when the socket cannot say: an
// address that is no loopback address (a loopback-only user is refused rather than let in).
std::string peer_address_of(const asio::basic_socket<asio::ip::tcp>& socket);

}  // namespace firemq
