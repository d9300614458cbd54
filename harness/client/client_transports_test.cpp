// The harness's TLS and WebSocket clients against servers built on Boost.Beast and Asio (a WebSocket library
// and OpenSSL's server side): the hand-written client must interoperate with a correct peer, and report what
// the peer does (pings, closes with a code, text messages, refused upgrades).
#include <utility>  // before Boost 1.74's headers under g++ 12

#include <gtest/gtest.h>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>

#include "harness/client/wire.h"
#include "harness/process/test_certificates.h"
#include "protocol/messages.h"

namespace firemq::conform {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

Clock::time_point soon(std::chrono::milliseconds ms = 3000ms) { return Clock::now() + ms; }

const TestCertificates& certificates() {
  static const TestCertificates files = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("firemq-client-transports-test-" + std::to_string(::getpid()));
    auto made = make_test_certificates(dir);
    if (!made) throw std::runtime_error(made.error());
    return *made;
  }();
  return files;
}

asio::ssl::context server_tls() {
  asio::ssl::context ctx(asio::ssl::context::tls_server);
  ctx.use_certificate_chain_file(certificates().cert_file.string());
  ctx.use_private_key_file(certificates().key_file.string(), asio::ssl::context::pem);
  return ctx;
}

// One connection on a free port of 127.0.0.1, served by `serve` on a thread of its own.
class OneConnectionServer {
 public:
  explicit OneConnectionServer(std::function<void(tcp::socket)> serve)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this, serve = std::move(serve)] {
      try {
        serve(acceptor_.accept());
      } catch (const std::exception& e) {
        failure_ = e.what();
      }
    });
  }
  ~OneConnectionServer() { thread_.join(); }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::string failure_;

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

// A WebSocket server's handshake: /fire is upgraded, any other path gets 404.
template <class Stream>
bool accept_on_fire(websocket::stream<Stream>& ws) {
  beast::flat_buffer buffer;
  http::request<http::string_body> request;
  http::read(ws.next_layer(), buffer, request);
  if (request.target().substr(0, 5) != "/fire") {
    http::response<http::string_body> refusal{http::status::not_found, request.version()};
    refusal.body() = "no such endpoint";
    refusal.prepare_payload();
    http::write(ws.next_layer(), refusal);
    return false;
  }
  ws.accept(request);
  return true;
}

WireAddress address(Transport transport, std::uint16_t port) {
  WireAddress a;
  a.transport = transport;
  a.host = "127.0.0.1";
  a.port = port;
  a.vhost_query = "/";
  a.tls.ca_file = certificates().ca_file.string();
  return a;
}

Bytes ping_frame() { return encode_frame(op::Ping{}); }

// A WebSocket echo: each binary message back as it came.
template <class Stream>
void echo_one(websocket::stream<Stream>& ws, std::string* seen) {
  beast::flat_buffer message;
  ws.read(message);
  *seen = beast::buffers_to_string(message.data());
  ws.binary(true);
  ws.write(message.data());
  ws.close(websocket::close_code::normal);
}

TEST(WebSocketClient, SendsAFrameAsOneBinaryMessageWithoutLenAndReadsTheAnswer) {
  std::string seen;
  OneConnectionServer server([&](tcp::socket s) {
    websocket::stream<tcp::socket> ws(std::move(s));
    if (accept_on_fire(ws)) echo_one(ws, &seen);
  });
  WireConnection wire;
  ASSERT_TRUE(wire.connect(address(Transport::ws, server.port()), soon()));
  // Stream bytes, as cases write them: FMQ1 and len go, the frame's body stays.
  Bytes stream(kPreamble.begin(), kPreamble.end());
  const Bytes ping = ping_frame();
  stream.insert(stream.end(), ping.begin(), ping.end());
  ASSERT_TRUE(wire.send(stream, soon()));
  WireEvent event = wire.receive(soon());
  ASSERT_TRUE(std::holds_alternative<FrameEvent>(event));
  EXPECT_EQ(std::get<FrameEvent>(event).frame.op(), static_cast<std::uint8_t>(OpCode::ping));
  EXPECT_EQ(Bytes(seen.begin(), seen.end()), Bytes(ping.begin() + 4, ping.end()));
  WireEvent closed = wire.receive(soon());
  ASSERT_TRUE(std::holds_alternative<ClosedEvent>(closed));
  EXPECT_EQ(std::get<ClosedEvent>(closed).ws_close_code, 1000);
  EXPECT_TRUE(server.failure_.empty()) << server.failure_;
}

TEST(WebSocketClient, AMessageInFragmentsArrivesWhole) {
  std::string seen;
  OneConnectionServer server([&](tcp::socket s) {
    websocket::stream<tcp::socket> ws(std::move(s));
    if (accept_on_fire(ws)) echo_one(ws, &seen);
  });
  WireConnection wire;
  ASSERT_TRUE(wire.connect(address(Transport::ws, server.port()), soon()));
  const Bytes body = frame_message(0x03, {}, Bytes(1000, 0x5a));
  ASSERT_TRUE(wire.ws_send_message(WsOpcode::binary, body, 7, soon()));
  WireEvent event = wire.receive(soon());
  ASSERT_TRUE(std::holds_alternative<FrameEvent>(event));
  EXPECT_EQ(seen.size(), body.size());
}

TEST(WebSocketClient, AnswersPingsAndReportsTheCloseCode) {
  std::atomic<bool> pong{false};
  OneConnectionServer server([&](tcp::socket s) {
    websocket::stream<tcp::socket> ws(std::move(s));
    if (!accept_on_fire(ws)) return;
    ws.control_callback([&](websocket::frame_type kind, beast::string_view payload) {
      if (kind == websocket::frame_type::pong && payload == "are you there") pong = true;
    });
    ws.ping("are you there");
    beast::flat_buffer message;
    ws.read(message);  // the pong is read on the way
    ws.close({websocket::close_code::policy_error, "go away"});
  });
  WireConnection wire;
  ASSERT_TRUE(wire.connect(address(Transport::ws, server.port()), soon()));
  EXPECT_TRUE(std::holds_alternative<TimeoutEvent>(wire.receive(soon(300ms))));  // the ping, answered
  ASSERT_TRUE(wire.send_frame(0x03, {}, {}, soon()));
  WireEvent event = wire.receive(soon());
  ASSERT_TRUE(std::holds_alternative<ClosedEvent>(event));
  EXPECT_EQ(std::get<ClosedEvent>(event).ws_close_code, 1008);
  EXPECT_NE(std::get<ClosedEvent>(event).how.find("go away"), std::string::npos);
  EXPECT_TRUE(pong);
}

TEST(WebSocketClient, ATextMessageIsNoFrame) {
  OneConnectionServer server([&](tcp::socket s) {
    websocket::stream<tcp::socket> ws(std::move(s));
    if (!accept_on_fire(ws)) return;
    ws.text(true);
    ws.write(asio::buffer(std::string("hello")));
    beast::flat_buffer message;
    beast::error_code ignored;
    ws.read(message, ignored);
  });
  WireConnection wire;
  ASSERT_TRUE(wire.connect(address(Transport::ws, server.port()), soon()));
  EXPECT_TRUE(std::holds_alternative<BadFramingEvent>(wire.receive(soon())));
  wire.disconnect();
}

TEST(WebSocketClient, ARefusedUpgradeSaysItsStatus) {
  OneConnectionServer server([&](tcp::socket s) {
    websocket::stream<tcp::socket> ws(std::move(s));
    accept_on_fire(ws);
  });
  WireConnection wire;
  WireAddress other = address(Transport::ws, server.port());
  other.path = "/other";
  auto connected = wire.connect(other, soon());
  ASSERT_FALSE(connected);
  EXPECT_TRUE(connected.error().reached);
  EXPECT_EQ(connected.error().http_status, 404);
}

TEST(WebSocketClient, OverTls) {
  std::string seen;
  OneConnectionServer server([&](tcp::socket s) {
    asio::ssl::context tls = server_tls();
    websocket::stream<asio::ssl::stream<tcp::socket>> ws(std::move(s), tls);
    ws.next_layer().handshake(asio::ssl::stream_base::server);
    if (accept_on_fire(ws)) echo_one(ws, &seen);
  });
  WireConnection wire;
  auto connected = wire.connect(address(Transport::wss, server.port()), soon());
  ASSERT_TRUE(connected) << connected.error().message;
  ASSERT_TRUE(wire.send(ping_frame(), soon()));
  WireEvent event = wire.receive(soon());
  ASSERT_TRUE(std::holds_alternative<FrameEvent>(event));
  EXPECT_EQ(seen.size(), ping_frame().size() - 4);
}

// fires: FMQ1 and len-prefixed frames inside TLS, exactly as on TCP.
TEST(TlsStream, CarriesTheTcpFramingAndChecksTheCertificate) {
  Bytes seen(4 + ping_frame().size());
  OneConnectionServer server([&](tcp::socket s) {
    asio::ssl::context tls = server_tls();
    asio::ssl::stream<tcp::socket> stream(std::move(s), tls);
    stream.handshake(asio::ssl::stream_base::server);
    asio::read(stream, asio::buffer(seen));
    asio::write(stream, asio::buffer(ping_frame()));
    beast::error_code ignored;
    stream.shutdown(ignored);
  });
  WireConnection wire;
  auto connected = wire.connect(address(Transport::fires, server.port()), soon());
  ASSERT_TRUE(connected) << connected.error().message;
  Bytes stream(kPreamble.begin(), kPreamble.end());
  const Bytes ping = ping_frame();
  stream.insert(stream.end(), ping.begin(), ping.end());
  ASSERT_TRUE(wire.send(stream, soon()));
  WireEvent event = wire.receive(soon());
  ASSERT_TRUE(std::holds_alternative<FrameEvent>(event));
  EXPECT_EQ(seen, stream);
}

TEST(TlsStream, RefusesACertificateTheCaFileDoesNotVouchFor) {
  OneConnectionServer server([&](tcp::socket s) {
    asio::ssl::context tls = server_tls();
    asio::ssl::stream<tcp::socket> stream(std::move(s), tls);
    beast::error_code ignored;
    stream.handshake(asio::ssl::stream_base::server, ignored);
  });
  WireConnection wire;
  WireAddress a = address(Transport::fires, server.port());
  a.tls.ca_file = certificates().cert_file.string();  // a server certificate is no CA
  auto connected = wire.connect(a, soon());
  ASSERT_FALSE(connected);
  EXPECT_NE(connected.error().message.find("certificate"), std::string::npos) << connected.error().message;
}

TEST(TlsStream, InsecureSkipsTheCheck) {
  OneConnectionServer server([&](tcp::socket s) {
    asio::ssl::context tls = server_tls();
    asio::ssl::stream<tcp::socket> stream(std::move(s), tls);
    stream.handshake(asio::ssl::stream_base::server);
  });
  WireConnection wire;
  WireAddress a = address(Transport::fires, server.port());
  a.tls = {"", true};
  auto connected = wire.connect(a, soon());
  EXPECT_TRUE(connected) << connected.error().message;
}

}  // namespace
}  // namespace firemq::conform
