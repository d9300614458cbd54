#include "reference-broker/http_server.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>

#include "reference-broker/config.h"
#include "reference-broker/stream_transport.h"
#include "reference-broker/websocket_transport.h"

namespace firemq {
namespace {

namespace http = beast::http;
using boost::system::error_code;

template <class Stream>
awaitable<bool> respond(Stream& stream, const HttpRequest& request, HttpAnswer answer) {
  http::response<http::string_body> response{answer.status, request.version()};
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, answer.content_type);
  if (answer.ask_for_credentials) response.set(http::field::www_authenticate, "Basic realm=\"FireMQ management\"");
  response.keep_alive(request.keep_alive());
  if (!answer.text.empty() && answer.text.back() != '\n') answer.text += '\n';
  response.body() = std::move(answer.text);
  response.prepare_payload();
  error_code ec;
  co_await http::async_write(stream, response, asio::redirect_error(use_awaitable, ec));
  co_return !ec && request.keep_alive();
}

// The WebSocket transport for the stream an upgrade arrived on: ws over TCP, wss over TLS.
std::unique_ptr<Transport> make_transport(beast::tcp_stream stream, HttpRequest request, TransportHints hints,
                                          const HttpServerEnv& env) {
  return make_ws_transport(std::move(stream), std::move(request), std::move(hints), env.handshake_timeout, env.faults);
}
std::unique_ptr<Transport> make_transport(TlsHttpStream stream, HttpRequest request, TransportHints hints,
                                          const HttpServerEnv& env) {
  return make_wss_transport(std::move(stream), std::move(request), std::move(hints), env.handshake_timeout, env.faults);
}

// A request over the bounds: 413 (body) or 431 (headers), said before closing. What the client is still sending
// is read and dropped for a moment, so that the kernel does not answer it with a reset that destroys the answer.
template <class Stream>
awaitable<void> refuse_oversized(Stream& stream, bool body) {
  http::response<http::string_body> response{
      body ? http::status::payload_too_large : http::status::request_header_fields_too_large, 11};
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, "application/json");
  response.keep_alive(false);
  response.body() = std::string(R"({"error":"bad_request","reason":")") +
                    (body ? "the request body is larger than " + std::to_string(kMaxRequestBodyBytes) + " bytes"
                          : "the request headers are larger than " + std::to_string(kMaxRequestHeaderBytes) + " bytes") +
                    "\"}\n";
  response.prepare_payload();
  error_code ec;
  co_await http::async_write(stream, response, asio::redirect_error(use_awaitable, ec));
  auto& socket = beast::get_lowest_layer(stream).socket();
  socket.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
  std::array<char, 16 * 1024> discard;
  while (!ec) co_await stream.async_read_some(asio::buffer(discard), asio::redirect_error(use_awaitable, ec));
}

// Reads requests until one is upgraded to a FireMQ connection, the client closes, or a request is refused
// without keep-alive.
template <class Stream>
awaitable<void> serve(Stream stream, const HttpServerEnv& env) {
  beast::flat_buffer buffer;
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kMaxRequestHeaderBytes);
    parser.body_limit(kMaxRequestBodyBytes);
    beast::get_lowest_layer(stream).expires_after(env.handshake_timeout);
    error_code ec;
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::body_limit || ec == http::error::header_limit) {
      co_await refuse_oversized(stream, ec == http::error::body_limit);
      co_return;
    }
    if (ec) break;  // closed, timed out, or not HTTP: there is no request to answer
    HttpRequest request = parser.release();
    // An upgrade is for /fire only (404 elsewhere, http_routes); the management API and UI take the other requests.
    const bool for_management = env.management != nullptr && !beast::websocket::is_upgrade(request) &&
                                ManagementApi::serves(std::string_view(request.target().data(), request.target().size()));
    HttpAnswer answer = for_management ? env.management->handle(request, peer_address_of(beast::get_lowest_layer(stream).socket()))
                                       : route_http_request(request);
    if (!answer.upgrade) {
      const bool more = co_await respond(stream, request, std::move(answer));
      if (more) continue;
      break;
    }
    if (env.faults.ignore_url_vhost) answer.hints = {};
    env.start_connection(make_transport(std::move(stream), std::move(request), std::move(answer.hints), env));
    co_return;
  }
  error_code ec;
  beast::get_lowest_layer(stream).socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
}

awaitable<void> serve_tls(TlsHttpStream stream, const HttpServerEnv& env) {
  beast::get_lowest_layer(stream).expires_after(env.handshake_timeout);
  error_code ec;
  co_await stream.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return;  // plain bytes, an old TLS version, a client that vanished: nothing to answer
  co_await serve(std::move(stream), env);
}

}  // namespace

void serve_http(asio::ip::tcp::socket socket, const HttpServerEnv& env) {
  error_code ec;
  socket.set_option(asio::ip::tcp::no_delay(true), ec);  // small frames leave at once, as on fire://
  auto executor = socket.get_executor();
  asio::co_spawn(executor, serve(beast::tcp_stream(std::move(socket)), env), asio::detached);
}

void serve_https(asio::ip::tcp::socket socket, asio::ssl::context& tls, const HttpServerEnv& env) {
  error_code ec;
  socket.set_option(asio::ip::tcp::no_delay(true), ec);
  auto executor = socket.get_executor();
  asio::co_spawn(executor, serve_tls(TlsHttpStream(beast::tcp_stream(std::move(socket)), tls), env), asio::detached);
}

}  // namespace firemq
