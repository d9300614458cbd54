// --amqp-url: where a --url target's AMQP listener is (harness/run/amqp_side.h).
#include "harness/run/amqp_side.h"

#include <gtest/gtest.h>

namespace firemq::conform {
namespace {

TEST(AmqpUrl, TakesHostPortCredentialsAndVhost) {
  auto e = parse_amqp_url("amqp://alice:secret@broker.example:5673/orders");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->host, "broker.example");
  EXPECT_EQ(e->port, 5673);
  EXPECT_EQ(e->user, "alice");
  EXPECT_EQ(e->password, "secret");
  EXPECT_EQ(e->vhost, "orders");
}

TEST(AmqpUrl, DefaultsToPort5672GuestAndTheRootVhost) {
  auto e = parse_amqp_url("amqp://127.0.0.1");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->port, 5672);
  EXPECT_EQ(e->user, "guest");
  EXPECT_EQ(e->password, "guest");
  EXPECT_EQ(e->vhost, "/");
}

TEST(AmqpUrl, PercentDecodesTheVhost) {
  auto e = parse_amqp_url("amqp://u:p@[::1]/%2f");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 5672);
  EXPECT_EQ(e->vhost, "/");
}

TEST(AmqpUrl, AmqpsIsInsideTlsOnPort5671ByDefault) {
  auto e = parse_amqp_url("amqps://u:p@broker.example/", TlsOptions{"ca.pem", false});
  ASSERT_TRUE(e) << e.error();
  EXPECT_TRUE(e->tls);
  EXPECT_EQ(e->port, 5671);
  EXPECT_EQ(e->tls_options.ca_file, "ca.pem");
  auto plain = parse_amqp_url("amqp://u:p@broker.example/");
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_FALSE(plain->tls);
}

TEST(AmqpUrl, RefusesOtherSchemes) {
  EXPECT_FALSE(parse_amqp_url("fire://127.0.0.1:5673/"));
  EXPECT_FALSE(parse_amqp_url("amqpx://127.0.0.1/"));
}

}  // namespace
}  // namespace firemq::conform
