#include "protocol/url.h"

#include <gtest/gtest.h>

namespace firemq {
namespace {

Url parse_ok(std::string_view text) {
  auto url = parse_url(text);
  EXPECT_TRUE(url.ok()) << text << ": " << (url.ok() ? "" : url.error());
  return url.ok() ? *url : Url{};
}

TEST(Url, FireWithEverythingSpelledOut) {
  EXPECT_EQ(parse_ok("fire://alice:s3cret@broker.example:6000/dev"),
            (Url{"fire", false, false, "broker.example", 6000, "alice", "s3cret", "dev", ""}));
}

TEST(Url, DefaultsForEachScheme) {
  EXPECT_EQ(parse_ok("fire://h"), (Url{"fire", false, false, "h", 5673, "guest", "guest", "/", ""}));
  EXPECT_EQ(parse_ok("fires://h"), (Url{"fires", true, false, "h", 5674, "guest", "guest", "/", ""}));
  EXPECT_EQ(parse_ok("ws://h"), (Url{"ws", false, true, "h", 15672, "guest", "guest", "/", "/fire"}));
  EXPECT_EQ(parse_ok("wss://h"), (Url{"wss", true, true, "h", 15671, "guest", "guest", "/", "/fire"}));
}

TEST(Url, FireVhostIsThePercentDecodedPath) {
  EXPECT_EQ(parse_ok("fire://h/").vhost, "/");
  EXPECT_EQ(parse_ok("fire://h/%2F").vhost, "/");
  EXPECT_EQ(parse_ok("fire://h/%2f").vhost, "/");
  EXPECT_EQ(parse_ok("fire://h/my%20vhost").vhost, "my vhost");
  EXPECT_EQ(parse_ok("fire://h/a/b").vhost, "a/b");
  EXPECT_EQ(parse_ok("fire://h/dev?heartbeat=10").vhost, "dev");
}

TEST(Url, WebSocketPathIsTheEndpointAndVhostTheQueryParameter) {
  const Url url = parse_ok("ws://localhost:15672/fire?vhost=dev");
  EXPECT_EQ(url.path, "/fire");
  EXPECT_EQ(url.vhost, "dev");
  EXPECT_EQ(parse_ok("ws://h/").path, "/fire");
  EXPECT_EQ(parse_ok("ws://h/custom/ep?x=1&vhost=%2Fa+b").path, "/custom/ep");
  EXPECT_EQ(parse_ok("ws://h/custom/ep?x=1&vhost=%2Fa+b").vhost, "/a+b");
  EXPECT_EQ(parse_ok("ws://h/fire?vhost=").vhost, "/");
}

TEST(Url, UserInfoIsPercentDecodedAndDefaultsPartByPart) {
  const Url url = parse_ok("fire://us%65r:p%40ss@h");
  EXPECT_EQ(url.user, "user");
  EXPECT_EQ(url.password, "p@ss");
  EXPECT_EQ(parse_ok("fire://bob@h").password, "guest");
  EXPECT_EQ(parse_ok("fire://bob:@h").password, "");
}

TEST(Url, Ipv6LiteralsLoseTheirBrackets) {
  const Url url = parse_ok("fire://[::1]:7000/");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 7000);
  EXPECT_EQ(parse_ok("fire://[::1]").port, 5673);
}

TEST(Url, PercentDecodedUtf8IsKept) {
  EXPECT_EQ(parse_ok("fire://h/caf%C3%A9").vhost, "café");
  EXPECT_EQ(parse_ok("fire://h/%F0%9F%94%A5").vhost, "\xf0\x9f\x94\xa5");
}

TEST(Url, SchemeIsCaseInsensitive) { EXPECT_EQ(parse_ok("FIRES://h").scheme, "fires"); }

TEST(Url, EmptyPortMeansTheDefault) { EXPECT_EQ(parse_ok("fire://h:/").port, 5673); }

TEST(Url, PortEdges) {
  EXPECT_EQ(parse_ok("fire://h:1").port, 1);
  EXPECT_EQ(parse_ok("fire://h:65535").port, 65535);
}

TEST(Url, BadUrlsSayWhatIsWrong) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"", "empty"},
      {"localhost:5673", "missing scheme"},
      {"amqp://h", "unknown scheme 'amqp'"},
      {"fire://", "missing host"},
      {"fire://user@:5673", "missing host"},
      {"fire://h:0", "port 0"},
      {"fire://h:65536", "out of range"},
      {"fire://h:56x", "not a decimal number"},
      {"fire://h/%zz", "vhost (the path): '%' is not followed by two hex digits"},
      {"fire://h/%4", "two hex digits"},
      {"fire://us%er@h", "user name: '%'"},
      {"fire://u:p%@h", "password: '%'"},
      {"fire://h/a#frag", "fragment"},
      {"fire://h /dev", "space"},
      {"fire://[::1", "IPv6"},
      {"ws://h/fire?vhost=%G1", "vhost query parameter"},
      {"fire://h/%ff", "not UTF-8"},
      {"fire://h/%c3", "not UTF-8"},
      {"fire://h/%ed%a0%80", "not UTF-8"},  // a UTF-16 surrogate
  };
  for (const auto& [text, expected] : cases) {
    auto url = parse_url(text);
    ASSERT_FALSE(url.ok()) << text;
    EXPECT_NE(url.error().find(expected), std::string::npos) << text << " -> " << url.error();
  }
}

}  // namespace
}  // namespace firemq

namespace firemq {
namespace {

TEST(PercentEncode, KeepsUnreservedAndEncodesTheRestSoThatDecodingGivesItBack) {
  EXPECT_EQ(percent_encode("/ a~b-c._\xc3\xa9"), "%2F%20a~b-c._%C3%A9");
  EXPECT_EQ(percent_encode(""), "");
  auto back = percent_decode(percent_encode("odd/%?#&=\xe2\x98\x83"));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "odd/%?#&=\xe2\x98\x83");
}

}  // namespace
}  // namespace firemq
