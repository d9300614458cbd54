#include "reference-broker/http_server.h"

#include <algorithm>
#include <cctype>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>

#include "protocol/url.h"
#include "reference-broker/config.h"
#include "reference-broker/websocket_transport.h"

namespace firemq {
namespace {

namespace http = beast::http;
using boost::system::error_code;

// Bounds on what one request may hold before it is refused (Beast answers past them with an error).
constexpr std::uint32_t kMaxRequestHeaderBytes = 8 * 1024;
constexpr std::uint64_t kMaxRequestBodyBytes = 1024 * 1024;

std::string_view target_of(const UpgradeRequest& request) {
  return std::string_view(request.target().data(), request.target().size());
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

// RFC 6455 4.1: "a base64-encoded value that, when decoded, is 16 bytes in length", so 22 base64 digits and
// "==". Beast checks only that the header is present and not too long.
bool valid_websocket_key(const UpgradeRequest& request) {
  const auto key = request[http::field::sec_websocket_key];
  if (key.size() != 24 || key.substr(22) != "==") return false;
  return std::all_of(key.begin(), key.begin() + 22, [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/'; });
}

template <class Stream>
awaitable<bool> respond(Stream& stream, const UpgradeRequest& request, http::status status, std::string text) {
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

[[maybe_unused]] std::unique_ptr<Transport> make_transport(beast::tcp_stream stream, UpgradeRequest request, TransportHints hints,
                                          std::chrono::milliseconds timeout) {
  return make_ws_transport(std::move(stream), std::move(request), std::move(hints), timeout);
}
[[maybe_unused]] std::unique_ptr<Transport> make_transport(TlsHttpStream stream, UpgradeRequest request, TransportHints hints,
                                          std::chrono::milliseconds timeout) {
  return make_wss_transport(std::move(stream), std::move(request), std::move(hints), timeout);
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
    UpgradeRequest request = parser.release();
    const std::string_view path = path_of(target_of(request));
    if (path != kWebSocketPath) {
      const bool more = co_await respond(stream, request, http::status::not_found,
                                         "no such path: FireMQ's WebSocket endpoint is " + std::string(kWebSocketPath));
      if (more) continue;
      break;
    }
    if (!beast::websocket::is_upgrade(request)) {
      const bool more = co_await respond(stream, request, http::status::upgrade_required,
                                         "this is FireMQ's WebSocket endpoint: connect with a WebSocket client");
      if (more) continue;
      break;
    }
    if (!valid_websocket_key(request)) {
      co_await respond(stream, request, http::status::bad_request,
                       "bad Sec-WebSocket-Key: RFC 6455 wants the base64 of 16 random bytes");
      break;
    }
    auto vhost = vhost_parameter(target_of(request));
    if (!vhost) {
      co_await respond(stream, request, http::status::bad_request, "bad ?vhost= parameter: " + vhost.error());
      break;
    }
    env.start_connection(make_transport(std::move(stream), std::move(request), TransportHints{*vhost},
                                        env.handshake_timeout));
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

void serve_http(asio::ip::tcp::socket socket, const HttpServerEnv& env) {
  auto executor = socket.get_executor();
  asio::co_spawn(executor, serve(beast::tcp_stream(std::move(socket)), env), asio::detached);
}

void serve_https(asio::ip::tcp::socket socket, asio::ssl::context& tls, const HttpServerEnv& env) {
  auto executor = socket.get_executor();
  asio::co_spawn(executor, serve_tls(TlsHttpStream(beast::tcp_stream(std::move(socket)), tls), env), asio::detached);
}

}  // namespace firemq
