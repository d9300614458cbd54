#include "reference-broker/net/http_server.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>

#include <type_traits>

#include "reference-broker/core/config.h"
#include "reference-broker/core/log.h"
#include "reference-broker/net/stream_transport.h"
#include "reference-broker/net/websocket_transport.h"

namespace firemq {
namespace {

namespace http = beast::http;
using boost::system::error_code;

// On every answer, the UI's page and the API's JSON alike (as OWASP's secure headers advise): the browser
// must not guess another content type (a JSON error quoting a peer's text read as HTML), nor put any of it in a
// frame. Only a page whose answer names its own policy runs code (the UI's); everything else gets a policy that
// allows nothing.
template <class Body>
void set_security_headers(http::response<Body>& response, const HttpAnswer& answer) {
  response.set("X-Content-Type-Options", "nosniff");
  response.set(http::field::x_frame_options, "DENY");
  response.set("Content-Security-Policy", answer.content_security_policy.empty()
                                              ? std::string("default-src 'none'; frame-ancestors 'none'")
                                              : answer.content_security_policy);
}

template <class Stream>
awaitable<bool> respond(Stream& stream, const HttpRequest& request, HttpAnswer answer) {
  http::response<http::string_body> response{answer.status, request.version()};
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, answer.content_type);
  set_security_headers(response, answer);
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

// The application's answer. An exception out of it is a broker bug (fuzz_management looks for them): the request
// gets a 500 and a log line, as RabbitMQ's management answers a handler that crashed, and the listener goes on
// (without this the coroutine ended and the client saw its connection dropped).
HttpAnswer application_answer(HttpApplication& application, const HttpRequest& request,
                              const std::optional<std::string>& peer_address) {
  try {
    return application.handle(request, peer_address);
  } catch (const std::exception& e) {
    log_line("internal error answering " + std::string(request.method_string()) + " " +
             printable(std::string_view(request.target().data(), request.target().size())) + ": " +
             printable(e.what(), 512));
    HttpAnswer answer;
    answer.status = http::status::internal_server_error;
    answer.content_type = "application/json";
    answer.text = R"({"error":"internal_error","reason":"the broker failed to answer this request; its log says why"})";
    return answer;
  }
}

// A request refused before it is answered, said before closing (RFC 9110: 400 for a message the server cannot
// parse, 413 for a body over the bound, 431 for headers over it), with the management API's JSON error shape.
// What the client is still sending is read and dropped for a moment, so that the kernel does not answer it with
// a reset that destroys the answer.
template <class Stream>
awaitable<void> refuse_request(Stream& stream, http::status status, const std::string& reason) {
  http::response<http::string_body> response{status, 11};
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, "application/json");
  set_security_headers(response, HttpAnswer{});
  response.keep_alive(false);
  response.body() = R"({"error":"bad_request","reason":")" + reason + "\"}\n";
  response.prepare_payload();
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
  error_code ec;
  co_await http::async_write(stream, response, asio::redirect_error(use_awaitable, ec));
  auto& socket = beast::get_lowest_layer(stream).socket();
  socket.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
  std::array<char, 16 * 1024> discard;
  while (!ec) co_await stream.async_read_some(asio::buffer(discard), asio::redirect_error(use_awaitable, ec));
}

// Whether a read's error means the client sent something that is not an HTTP request (a garbage request line,
// two different Content-Lengths, Content-Length with Transfer-Encoding, a negative length: Beast's parse errors),
// as opposed to a client that closed, timed out or was dropped, to which there is nothing to say.
bool is_malformed_request(const error_code& ec) {
  if (ec.category() != http::make_error_code(http::error::bad_method).category()) return false;
  return ec != http::error::end_of_stream && ec != http::error::partial_message && ec != http::error::need_more &&
         ec != http::error::need_buffer;
}

// An HTTP connection while it waits for a request: in the broker-wide handshake list (ConnectionRegistry), where
// FireMQ's and AMQP's connections wait for their welcome. Past --max-handshakes the longest waiting is dropped,
// whichever its listener, so a flood of sockets that send nothing or half a request on the ws/wss ports holds at
// most the bound. Leaves the list once a complete request is in (it is being answered), joins again while the
// keep-alive connection waits for the next.
class WaitingForRequest final : public InHandshake {
 public:
  WaitingForRequest(ConnectionRegistry* registry, beast::tcp_stream& stream) : registry_(registry), stream_(stream) {}
  WaitingForRequest(const WaitingForRequest&) = delete;
  WaitingForRequest& operator=(const WaitingForRequest&) = delete;
  ~WaitingForRequest() override { leave(); }

  void join() {
    if (registry_ != nullptr && !joined_) registry_->begin_handshake(this);
    joined_ = registry_ != nullptr;
  }
  void leave() {
    if (joined_) registry_->handshake_done(this);
    joined_ = false;
  }
  // Closing the socket ends the pending read (or TLS handshake) with an error; serve() then ends.
  void drop_in_handshake() override {
    leave();
    log_line("http connection " + describe_endpoints(stream_.socket()) +
             " dropped: too many connections in their handshake (--max-handshakes)");
    error_code ec;
    stream_.socket().close(ec);
  }

 private:
  ConnectionRegistry* registry_;
  beast::tcp_stream& stream_;
  bool joined_ = false;
};

// Waits until the next request's first byte is in `buffer` (it may already be: a pipelined request), for at most
// kHttpIdleTimeout. False: the client closed, or sent nothing in that time.
template <class Stream>
awaitable<bool> await_next_request(Stream& stream, beast::flat_buffer& buffer) {
  if (buffer.size() > 0) co_return true;
  beast::get_lowest_layer(stream).expires_after(kHttpIdleTimeout);
  error_code ec;
  const std::size_t n = co_await stream.async_read_some(buffer.prepare(4096), asio::redirect_error(use_awaitable, ec));
  buffer.commit(n);
  co_return !ec && n > 0;
}

// Serves one connection: for wss, the TLS handshake first; then requests until one is upgraded to a FireMQ
// connection, the client closes or idles, or a request is refused without keep-alive.
template <class Stream>
awaitable<void> serve(Stream stream, const HttpServerEnv& env) {
  auto& tcp = beast::get_lowest_layer(stream);
  WaitingForRequest waiting(env.handshakes, tcp);
  waiting.join();
  // One deadline from accept to the first complete request, TLS handshake included, as for fire:// and AMQP.
  tcp.expires_after(env.handshake_timeout);
  error_code ec;
  if constexpr (std::is_same_v<Stream, TlsHttpStream>) {
    co_await stream.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;  // plain bytes, an old TLS version, a client that vanished: nothing to answer
  }
  beast::flat_buffer buffer;
  for (bool first = true;; first = false) {
    if (!first) {
      waiting.join();
      if (!(co_await await_next_request(stream, buffer))) break;
      tcp.expires_after(env.handshake_timeout);  // the rest of the request, once it has begun
    }
    http::request_parser<http::string_body> parser;
    parser.header_limit(kMaxRequestHeaderBytes);
    parser.body_limit(kMaxRequestBodyBytes);
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    waiting.leave();
    if (ec == http::error::body_limit) {
      co_await refuse_request(stream, http::status::payload_too_large,
                              "the request body is larger than " + std::to_string(kMaxRequestBodyBytes) + " bytes");
      co_return;
    }
    if (ec == http::error::header_limit) {
      co_await refuse_request(stream, http::status::request_header_fields_too_large,
                              "the request headers are larger than " + std::to_string(kMaxRequestHeaderBytes) +
                                  " bytes");
      co_return;
    }
    if (is_malformed_request(ec)) {  // Beast's messages are fixed text ("bad Content-Length"): safe in JSON
      co_await refuse_request(stream, http::status::bad_request, "malformed HTTP request: " + ec.message());
      co_return;
    }
    if (ec) break;  // closed, timed out or dropped: there is no request to answer
    HttpRequest request = parser.release();
    // An upgrade is for /fire only (404 elsewhere, http_routes); the management API and UI take the other requests.
    const bool for_application = env.application != nullptr && !beast::websocket::is_upgrade(request) &&
                                 env.application->serves(
                                     std::string_view(request.target().data(), request.target().size()));
    HttpAnswer answer = for_application ? application_answer(*env.application, request, peer_address_of(tcp.socket()))
                                        : route_http_request(request);
    if (!answer.upgrade) {
      tcp.expires_after(env.handshake_timeout);  // a client that does not read its answer is not waited for
      const bool more = co_await respond(stream, request, std::move(answer));
      if (more) continue;
      break;
    }
    if (env.faults.ignore_url_vhost) answer.hints = {};
    // The page that asked a browser to open this socket (RFC 6455 section 10.2: the Origin header is for the
    // server to decide on). From an untrusted one, loopback_users treats the login as remote: any user but a
    // loopback-only one may still connect from any page, as browser SDKs need.
    if (const auto origin = request.find(http::field::origin);
        origin != request.end() && env.trusted_origins &&
        !env.trusted_origins->trusts(std::string_view(origin->value().data(), origin->value().size()))) {
      answer.hints.foreign_origin = std::string(origin->value());
    }
    // From here the FireMQ connection engine bounds it: the upgrade and hello are in its handshake.
    env.start_connection(make_transport(std::move(stream), std::move(request), std::move(answer.hints), env));
    co_return;
  }
  tcp.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
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
  asio::co_spawn(executor, serve(TlsHttpStream(beast::tcp_stream(std::move(socket)), tls), env), asio::detached);
}

}  // namespace firemq
