// The handshake's decisions: version, vhost (hello's or the WebSocket URL's), login, loopback users, heartbeat.
#include "reference-broker/session/handshake.h"

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
    return admit_hello(hello, TransportHints{std::move(url_vhost), std::nullopt, std::nullopt}, definitions_, config_);
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
  for (const op::Hello& hello :
       {hello_for("", "guest", "nope"), hello_for("nowhere"), hello_for("bare"), hello_for("/", "bob", "pw")}) {
    auto admitted = admit(hello);
    ASSERT_FALSE(admitted) << hello.vhost;
    EXPECT_EQ(admitted.error().code, 403u);
    EXPECT_TRUE(admitted.error().fatal);
  }
}

TEST_F(HandshakeTest, LoginIsSharedByEveryProtocol) {
  auto principal = log_in(definitions_, config_.loopback, {"plain", "bob", "pw", "dev", std::nullopt, std::nullopt});
  ASSERT_TRUE(principal);
  EXPECT_EQ(principal->vhost, "dev");
  auto other_mechanism = log_in(definitions_, config_.loopback,
                                {"AMQPLAIN-ish", "bob", "pw", "dev", std::nullopt, std::nullopt});
  ASSERT_FALSE(other_mechanism);
  EXPECT_EQ(other_mechanism.error().code, 403u);
}

// RabbitMQ's loopback_users (default [guest]): guest may log in only from a loopback address.
class LoopbackUsersTest : public HandshakeTest {
 protected:
  Result<Admission> admit_from(const std::string& peer, std::string user = "guest", std::string pass = "guest",
                               std::optional<std::string> foreign_origin = std::nullopt) {
    return admit_hello(hello_for("dev", std::move(user), std::move(pass)),
                       TransportHints{std::nullopt, peer, std::move(foreign_origin)}, definitions_, config_);
  }
};

TEST_F(LoopbackUsersTest, GuestWithTheRightPasswordFromElsewhereIsFatal403SayingWhy) {
  for (const char* peer : {"10.0.0.7", "192.168.1.2", "2001:db8::1", "::ffff:10.0.0.7", "unknown"}) {
    auto admitted = admit_from(peer);
    ASSERT_FALSE(admitted) << peer;
    EXPECT_EQ(admitted.error().code, 403u);
    EXPECT_TRUE(admitted.error().fatal);
    EXPECT_NE(admitted.error().msg.find("user 'guest' may only connect over loopback (loopback_users)"),
              std::string::npos)
        << admitted.error().msg;
  }
}

TEST_F(LoopbackUsersTest, AWrongPasswordFromElsewhereGetsTheUsualMessage) {
  auto admitted = admit_from("10.0.0.7", "guest", "nope");
  ASSERT_FALSE(admitted);
  EXPECT_EQ(admitted.error().msg, "login refused: unknown user or wrong password")
      << "only a client that knows guest's password learns that guest is loopback-only";
}

TEST_F(LoopbackUsersTest, GuestFromLoopbackIsAdmitted) {
  for (const char* peer : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(admit_from(peer)) << peer;
  }
}

TEST_F(LoopbackUsersTest, AnotherUserIsAdmittedFromElsewhere) { EXPECT_TRUE(admit_from("10.0.0.7", "bob", "pw")); }

TEST_F(LoopbackUsersTest, AnEmptyListAdmitsGuestFromAnywhere) {
  config_.loopback.users = {};
  EXPECT_TRUE(admit_from("10.0.0.7"));
}

TEST_F(LoopbackUsersTest, TheListAndTheLoopbackRangesAreConfigurable) {
  config_.loopback.users = split_names("bob, carol");
  EXPECT_TRUE(admit_from("10.0.0.7"));
  EXPECT_FALSE(admit_from("10.0.0.7", "bob", "pw"));
  config_.loopback.addresses = *parse_address_ranges("10.0.0.0/24");
  EXPECT_TRUE(admit_from("10.0.0.7", "bob", "pw"));
  EXPECT_FALSE(admit_from("127.0.0.1", "bob", "pw")) << "127.0.0.1 is not in 10.0.0.0/24";
}

TEST(AddressRanges, ParseCidrListsAndRefuseWhatIsNotOne) {
  auto ranges = parse_address_ranges("127.0.0.0/8, ::1,192.168.0.0/16");
  ASSERT_TRUE(ranges);
  EXPECT_EQ(ranges->size(), 3u);
  EXPECT_TRUE(in_ranges(*ranges, "192.168.200.1"));
  EXPECT_FALSE(in_ranges(*ranges, "192.169.0.1"));
  EXPECT_FALSE(in_ranges(*ranges, "::2"));
  EXPECT_TRUE(parse_address_ranges("")->empty());
  for (const char* bad : {"127.0.0.0/33", "::1/129", "localhost", "127.0.0.0/", "10.0.0.0/x"}) {
    auto refused = parse_address_ranges(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().find(bad), std::string::npos) << refused.error();
  }
}

// A WebSocket page of a foreign origin (http_server.cpp decides which are) is not loopback for loopback_users.
TEST_F(LoopbackUsersTest, GuestFromLoopbackUnderAForeignOriginIsFatal403NamingIt) {
  auto admitted = admit_from("127.0.0.1", "guest", "guest", "https://evil.example");
  ASSERT_FALSE(admitted);
  EXPECT_EQ(admitted.error().code, 403u);
  EXPECT_TRUE(admitted.error().fatal);
  EXPECT_NE(admitted.error().msg.find("a web page from origin 'https://evil.example' is not (--trusted-origins)"),
            std::string::npos)
      << admitted.error().msg;
  EXPECT_TRUE(admit_from("127.0.0.1", "bob", "pw", "https://evil.example"));  // only loopback-only users
  auto wrong = admit_from("127.0.0.1", "guest", "wrong", "https://evil.example");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().msg, "login refused: unknown user or wrong password");
}

TEST(OriginPolicy, LoopbackOriginsAndListedOnesAreTrusted) {
  const OriginPolicy by_default;
  for (const char* trusted : {"http://localhost", "https://localhost:8443", "HTTP://LOCALHOST:80", "http://127.0.0.1",
                              "http://127.9.9.9:3000", "https://[::1]", "http://[::1]:8080"}) {
    EXPECT_TRUE(by_default.trusts(std::string_view(trusted))) << trusted;
  }
  EXPECT_TRUE(by_default.trusts(std::nullopt));  // not a browser
  for (const char* foreign : {"https://evil.example", "null", "", "http://localhost.evil.example",
                              "http://127.0.0.1.evil.example", "http://evil.example#localhost", "http://localhost/path",
                              "ftp://localhost", "http://[::1", "http://[::2]", "http://10.0.0.1", "localhost"}) {
    EXPECT_FALSE(by_default.trusts(std::string_view(foreign))) << foreign;
  }
  auto listed = parse_trusted_origins("https://App.example.com, http://dev.example:8080");
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->trusts(std::string_view("https://app.example.com")));
  EXPECT_TRUE(listed->trusts(std::string_view("http://dev.example:8080")));
  EXPECT_FALSE(listed->trusts(std::string_view("http://dev.example")));
  EXPECT_FALSE(listed->trusts(std::string_view("http://localhost")));  // the list replaces the default
  auto added = parse_trusted_origins("loopback,https://app.example.com");
  ASSERT_TRUE(added);
  EXPECT_TRUE(added->trusts(std::string_view("http://localhost:1234")));
  EXPECT_TRUE(added->trusts(std::string_view("https://app.example.com")));
  auto none = parse_trusted_origins("");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->trusts(std::string_view("http://localhost")));
  EXPECT_TRUE(none->trusts(std::nullopt));
  for (const char* bad : {"app.example.com", "https://app.example.com/", "*", "https://"}) {
    auto refused = parse_trusted_origins(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().find(bad), std::string::npos) << refused.error();
  }
}

TEST_F(HandshakeTest, HeartbeatIsNegotiated) {
  config_.heartbeat_seconds = 60;
  op::Hello hello = hello_for("");
  hello.heartbeat = 10;
  EXPECT_EQ(admit(hello)->heartbeat_seconds, 10u);
}

}  // namespace
}  // namespace firemq
