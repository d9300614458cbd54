#include "reference-broker/http_server.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>

#include "reference-broker/config.h"
#include "reference-broker/websocket_transport.h"

namespace firemq {
namespace {

namespace http = beast::http;
using boost::system::error_code;

template <class Stream>
awaitable<bool> respond(Stream& stream, const HttpRequest& request, http::status status, std::string text) {
  http::response<http::string_body> response{status, request.version()};
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, "text/plain; charset=utf-8");
  response.keep_alive(request.keep_alive());
  response.body() = std::move(text) + "\n";
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
    if (ec) break;  // closed, timed out, or not HTTP: there is no request to answer
    HttpRequest request = parser.release();
    HttpAnswer answer = route_http_request(request);
    if (!answer.upgrade) {
      const bool more = co_await respond(stream, request, answer.status, std::move(answer.text));
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
