// The client proxy's WebSocket upgrade answers (client_proxy_stream.h): a valid upgrade on /fire gets 101 with
// the key's accept value; the others get the reference broker's refusals (docs/spec-notes.md, Q50).
#include "harness/client_mode/client_proxy_stream.h"

#include <gtest/gtest.h>

#include "harness/client/websocket_framing.h"

namespace firemq::conform {
namespace {

constexpr const char* kKey = "dGhlIHNhbXBsZSBub25jZQ==";  // RFC 6455 1.3's example

std::string request(const std::string& target, const std::string& key = kKey, const std::string& version = "13") {
  return "GET " + target +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: " +
         key + "\r\nSec-WebSocket-Version: " + version + "\r\n\r\n";
}

TEST(WebSocketUpgradeAnswer, UpgradeOnFireWithAQueryGets101WithTheAcceptValue) {
  const UpgradeAnswer answer = websocket_upgrade_answer(request("/fire?vhost=%2F"));
  EXPECT_TRUE(answer.upgraded);
  EXPECT_EQ(answer.response.rfind("HTTP/1.1 101 ", 0), 0u);
  // RFC 6455 1.3: this key's accept value.
  EXPECT_NE(answer.response.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), std::string::npos);
}

TEST(WebSocketUpgradeAnswer, OtherPathIs404) {
  const UpgradeAnswer answer = websocket_upgrade_answer(request("/"));
  EXPECT_FALSE(answer.upgraded);
  EXPECT_EQ(answer.response.rfind("HTTP/1.1 404 ", 0), 0u);
}

TEST(WebSocketUpgradeAnswer, PlainGetOfFireIs426) {
  const UpgradeAnswer answer = websocket_upgrade_answer("GET /fire HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_FALSE(answer.upgraded);
  EXPECT_EQ(answer.response.rfind("HTTP/1.1 426 ", 0), 0u);
}

TEST(WebSocketUpgradeAnswer, BadKeyIs400AndOtherVersionIs426) {
  EXPECT_EQ(websocket_upgrade_answer(request("/fire", "short")).response.rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(websocket_upgrade_answer(request("/fire", kKey, "8")).response.rfind("HTTP/1.1 426 ", 0), 0u);
}

TEST(WebSocketUpgradeAnswer, NotHttpIs400) {
  EXPECT_EQ(websocket_upgrade_answer("FMQ1\r\n\r\n").response.rfind("HTTP/1.1 400 ", 0), 0u);
}

}  // namespace
}  // namespace firemq::conform
