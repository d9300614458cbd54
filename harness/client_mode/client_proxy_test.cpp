// The client proxy's transports (client_proxy.h), against a stand-in broker (a loopback socket the test reads
// and writes): over ws and wss the client's binary messages reach the broker as FMQ1 and length-prefixed
// frames, the broker's frames reach the client as one message each (one-byte fragments with single_bytes), and
// what breaks the WebSocket rules is judged and answered as the reference broker does (a text message, FMQ1,
// an unmasked frame); over fires the proxy's TLS is trusted through the throwaway CA.
#include "harness/client_mode/client_proxy.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "harness/client/client_tls.h"
#include "harness/client/client_websocket.h"
#include "harness/process/test_certificates.h"
#include "harness/proxy/proxy_sockets.h"
#include "protocol/messages.h"
#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"

namespace firemq::conform {
namespace {

using namespace std::chrono_literals;

Clock::time_point soon() { return Clock::now() + 3s; }

const TestCertificates& certificates() {
  static const TestCertificates files = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("firemq-client-proxy-test-" + std::to_string(::getpid()));
    auto made = make_test_certificates(dir);
    if (!made) throw std::runtime_error(made.error());
    return *made;
  }();
  return files;
}

// A hello a client may send: ver 1 (lifecycle and hello rules judge every client frame).
Bytes hello_frame() {
  Bytes header;
  encode_map({{Value("ver"), Value(std::uint64_t{1})}}, header);
  return frame_stream(static_cast<std::uint8_t>(OpCode::hello), header, {});
}
Bytes without_len(const Bytes& frame) { return Bytes(frame.begin() + 4, frame.end()); }

// A proxy for `transport` in front of a stand-in broker, and the broker's end of the proxy's connection.
class ClientProxyTest : public ::testing::Test {
 protected:
  void start(Transport transport, ServerQuirks quirks = {}) {
    auto listener = listen_on_loopback();
    ASSERT_TRUE(listener) << listener.error();
    broker_listener_ = listener->fd;
    ProxyTransport how{transport, nullptr};
    if (uses_tls(transport)) {
      auto tls = ProxyTls::load(certificates());
      ASSERT_TRUE(tls) << tls.error();
      how.tls = *tls;
    }
    auto proxy = ClientProxy::start("127.0.0.1", listener->port, how, quirks, Clock::now());
    ASSERT_TRUE(proxy) << proxy.error();
    proxy_ = std::move(*proxy);
  }
  void TearDown() override {
    if (proxy_) proxy_->stop();
    if (broker_ >= 0) ::close(broker_);
    if (broker_listener_ >= 0) ::close(broker_listener_);
  }

  // The client's byte stream to the proxy: TCP, or TLS trusting the throwaway CA.
  std::unique_ptr<ByteStream> connect(Transport transport) {
    auto tcp = TcpStream::connect("127.0.0.1", proxy_->port(), soon());
    EXPECT_TRUE(tcp);
    if (!uses_tls(transport)) return std::move(*tcp);
    auto tls = TlsStream::handshake(std::move(*tcp), "127.0.0.1", {certificates().ca_file.string(), false}, soon());
    EXPECT_TRUE(tls) << (tls ? "" : tls.error());
    return tls ? std::move(*tls) : nullptr;
  }
  std::unique_ptr<WebSocketClient> upgrade(Transport transport) {
    auto ws = std::make_unique<WebSocketClient>(connect(transport), kDefaultMaxFrame);
    WireAddress address{transport, "127.0.0.1", proxy_->port(), {}, "/fire", std::string("/")};
    auto upgraded = ws->upgrade(address, soon());
    EXPECT_TRUE(upgraded) << (upgraded ? "" : upgraded.error().message);
    return ws;
  }

  // What the broker received, once `size` bytes are in (or the time is up).
  Bytes broker_reads(std::size_t size) {
    if (broker_ < 0) broker_ = ::accept(broker_listener_, nullptr, nullptr);
    Bytes got;
    std::uint8_t buffer[4096];
    pollfd pfd{broker_, POLLIN, 0};
    while (got.size() < size && ::poll(&pfd, 1, 3000) > 0) {
      const ssize_t n = ::recv(broker_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      got.insert(got.end(), buffer, buffer + n);
    }
    return got;
  }
  std::vector<std::string> broken_rules() {
    std::vector<std::string> rules;
    for (const MonitorViolation& v : proxy_->violations()) rules.push_back(v.rule);
    return rules;
  }

  int broker_listener_ = -1;
  int broker_ = -1;
  std::unique_ptr<ClientProxy> proxy_;
};

TEST_F(ClientProxyTest, WebSocketMessageReachesTheBrokerAsFmq1AndALengthPrefixedFrame) {
  start(Transport::ws);
  auto ws = upgrade(Transport::ws);
  ASSERT_TRUE(ws->send_binary_messages({without_len(hello_frame())}, soon()));
  Bytes expected = {'F', 'M', 'Q', '1'};
  const Bytes hello = hello_frame();
  expected.insert(expected.end(), hello.begin(), hello.end());
  EXPECT_EQ(broker_reads(expected.size()), expected);
  proxy_->stop();
  EXPECT_EQ(broken_rules(), std::vector<std::string>{});
}

TEST_F(ClientProxyTest, BrokerFramesReachAWssClientAsOneMessageEachOrInOneByteFragments) {
  start(Transport::wss, ServerQuirks{true, false, 0});
  auto ws = upgrade(Transport::wss);
  ASSERT_TRUE(ws->send_binary_messages({without_len(hello_frame())}, soon()));
  broker_reads(4 + hello_frame().size());
  const Bytes welcome = frame_stream(static_cast<std::uint8_t>(OpCode::welcome), {}, {});
  ASSERT_TRUE(write_all(broker_, welcome));
  auto got = ws->receive(soon());
  const auto* message = std::get_if<WsMessageAssembler::Message>(&got);
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(message->opcode, WsOpcode::binary);
  EXPECT_EQ(message->data, without_len(welcome));
}

// What the reference broker answers a WebSocket message that is no frame: error 501, fatal, then a close.
void expect_refused_with_501_then_close(WebSocketClient& ws, std::uint16_t close_code) {
  auto got = ws.receive(soon());
  const auto* message = std::get_if<WsMessageAssembler::Message>(&got);
  ASSERT_NE(message, nullptr);
  auto frame = decode_message_frame(message->data, kDefaultMaxFrame);
  ASSERT_TRUE(frame);
  auto error = decode_frame(*frame);
  ASSERT_TRUE(error);
  const auto* refused = std::get_if<op::Error>(&*error);
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->code, 501u);
  EXPECT_TRUE(refused->fatal);
  got = ws.receive(soon());
  const auto* closed = std::get_if<WebSocketClient::Closed>(&got);
  ASSERT_NE(closed, nullptr);
  EXPECT_EQ(closed->code, std::optional<std::uint16_t>(close_code));
}

TEST_F(ClientProxyTest, Fmq1OnWebSocketBreaksItsRulesAndIsAnsweredWithError501AndAClose) {
  start(Transport::ws);
  auto ws = upgrade(Transport::ws);
  ASSERT_TRUE(ws->send_binary_messages({Bytes{'F', 'M', 'Q', '1'}}, soon()));
  expect_refused_with_501_then_close(*ws, 1000);
  EXPECT_EQ(broker_reads(5), (Bytes{'F', 'M', 'Q', '1'}));  // the proxy's own FMQ1, nothing of the client's
  proxy_->stop();
  const auto rules = broken_rules();
  EXPECT_NE(std::find(rules.begin(), rules.end(), "transport.websocket.no-preamble"), rules.end());
  EXPECT_NE(std::find(rules.begin(), rules.end(), "transport.websocket.one-message-per-frame"), rules.end());
}

TEST_F(ClientProxyTest, TextMessageBreaksOneMessagePerFrameAndIsAnsweredWithError501AndClose1003) {
  start(Transport::ws);
  auto ws = upgrade(Transport::ws);
  ASSERT_TRUE(ws->send_message(WsOpcode::text, without_len(hello_frame()), 1, soon()));
  expect_refused_with_501_then_close(*ws, 1003);
  EXPECT_EQ(broker_reads(5), (Bytes{'F', 'M', 'Q', '1'}));
  proxy_->stop();
  const auto rules = broken_rules();
  EXPECT_NE(std::find(rules.begin(), rules.end(), "transport.websocket.one-message-per-frame"), rules.end());
}

TEST_F(ClientProxyTest, UnmaskedClientFrameIsAnsweredWithClose1002) {
  start(Transport::ws);
  auto ws = upgrade(Transport::ws);
  ASSERT_TRUE(ws->send_raw(encode_ws_frame(true, static_cast<std::uint8_t>(WsOpcode::binary),
                                           without_len(hello_frame()), std::nullopt),
                           soon()));
  auto got = ws->receive(soon());
  const auto* closed = std::get_if<WebSocketClient::Closed>(&got);
  ASSERT_NE(closed, nullptr);
  EXPECT_EQ(closed->code, std::optional<std::uint16_t>(1002));
}

TEST_F(ClientProxyTest, UpgradeToAnotherPathIsRefused) {
  start(Transport::ws);
  auto ws = std::make_unique<WebSocketClient>(connect(Transport::ws), kDefaultMaxFrame);
  auto upgraded = ws->upgrade(WireAddress{Transport::ws, "127.0.0.1", proxy_->port(), {}, "/other", std::nullopt},
                              soon());
  ASSERT_FALSE(upgraded);
  EXPECT_EQ(upgraded.error().http_status, 404);
}

TEST_F(ClientProxyTest, FiresClientTrustingTheThrowawayCaReachesTheBroker) {
  start(Transport::fires);
  auto tls = connect(Transport::fires);
  ASSERT_NE(tls, nullptr);
  Bytes bytes = {'F', 'M', 'Q', '1'};
  const Bytes hello = hello_frame();
  bytes.insert(bytes.end(), hello.begin(), hello.end());
  ASSERT_TRUE(tls->write_all(bytes, soon()));
  EXPECT_EQ(broker_reads(bytes.size()), bytes);
}

}  // namespace
}  // namespace firemq::conform
