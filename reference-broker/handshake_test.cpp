// The handshake's decisions: version, vhost (hello's or the WebSocket URL's), login, heartbeat.
#include "reference-broker/handshake.h"

#include <gtest/gtest.h>

namespace firemq {
namespace {

Definitions test_definitions() {
  return *Definitions::parse(R"({
      "users": [{"name": "guest", "password": "guest"}, {"name": "bob", "password": "pw"}],
      "vhosts": [{"name": "/"}, {"name": "dev"}, {"name": "bare"}],
      "permissions": [{"user": "guest", "vhost": "/"}, {"user": "guest", "vhost": "dev"},
                      {"user": "bob", "vhost": "dev"}]})");
}

op::Hello hello_for(std::string vhost, std::string user = "guest", std::string pass = "guest") {
  op::Hello h;
  h.ver = 1;
  h.vhost = std::move(vhost);
  h.auth = {"plain", std::move(user), std::move(pass)};
  return h;
}

class HandshakeTest : public ::testing::Test {
 protected:
  Result<Admission> admit(const op::Hello& hello, std::optional<std::string> url_vhost = std::nullopt) {
    return admit_hello(hello, TransportHints{std::move(url_vhost)}, definitions_, config_);
  }
  BrokerConfig config_;
  Definitions definitions_ = test_definitions();
};

TEST_F(HandshakeTest, EmptyVhostMeansSlash) {
  auto admitted = admit(hello_for(""));
  ASSERT_TRUE(admitted);
  EXPECT_EQ(admitted->principal.vhost, "/");
  EXPECT_EQ(admitted->principal.user, "guest");
}

TEST_F(HandshakeTest, WebSocketUrlVhostIsUsedWhenHelloNamesNone) {
  auto admitted = admit(hello_for(""), "dev");
  ASSERT_TRUE(admitted);
  EXPECT_EQ(admitted->principal.vhost, "dev");
}

TEST_F(HandshakeTest, HelloAndWebSocketUrlNamingTheSameVhostAgree) {
  auto admitted = admit(hello_for("dev"), "dev");
  ASSERT_TRUE(admitted);
  EXPECT_EQ(admitted->principal.vhost, "dev");
}

TEST_F(HandshakeTest, HelloAndWebSocketUrlNamingDifferentVhostsIsFatal403) {
  auto admitted = admit(hello_for("/"), "dev");
  ASSERT_FALSE(admitted);
  EXPECT_EQ(admitted.error().code, 403u);
  EXPECT_TRUE(admitted.error().fatal);
  EXPECT_NE(admitted.error().msg.find("?vhost="), std::string::npos);
}

TEST_F(HandshakeTest, VersionOtherThanOneIsFatal540) {
  op::Hello hello = hello_for("");
  hello.ver = 2;
  auto admitted = admit(hello);
  ASSERT_FALSE(admitted);
  EXPECT_EQ(admitted.error().code, 540u);
  EXPECT_TRUE(admitted.error().fatal);
}

TEST_F(HandshakeTest, WrongPasswordUnknownVhostAndNoPermissionAreFatal403) {
  for (const op::Hello& hello : {hello_for("", "guest", "nope"), hello_for("nowhere"), hello_for("bare"),
                                 hello_for("/", "bob", "pw")}) {
    auto admitted = admit(hello);
    ASSERT_FALSE(admitted) << hello.vhost;
    EXPECT_EQ(admitted.error().code, 403u);
    EXPECT_TRUE(admitted.error().fatal);
  }
}

TEST_F(HandshakeTest, LoginIsSharedByEveryProtocol) {
  auto principal = log_in(definitions_, {"plain", "bob", "pw", "dev"});
  ASSERT_TRUE(principal);
  EXPECT_EQ(principal->vhost, "dev");
  auto other_mechanism = log_in(definitions_, {"AMQPLAIN-ish", "bob", "pw", "dev"});
  ASSERT_FALSE(other_mechanism);
  EXPECT_EQ(other_mechanism.error().code, 403u);
}

TEST_F(HandshakeTest, HeartbeatIsNegotiated) {
  config_.heartbeat_seconds = 60;
  op::Hello hello = hello_for("");
  hello.heartbeat = 10;
  EXPECT_EQ(admit(hello)->heartbeat_seconds, 10u);
}

}  // namespace
}  // namespace firemq
