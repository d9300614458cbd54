#include "reference-broker/access/permissions.h"

#include <gtest/gtest.h>

namespace firemq {
namespace {

TEST(Permissions, PatternsGrantByRegexSearchAndEmptyGrantsNothing) {
  const Permissions p(Permission{"^app-", ".*", ""});
  EXPECT_FALSE(p.check(Access::configure, "queue", "app-orders", "/", "u"));
  Status denied = p.check(Access::configure, "queue", "orders", "/", "u");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->code, 403);
  EXPECT_FALSE(denied->fatal);
  EXPECT_EQ(denied->msg, "configure access to queue 'orders' in vhost '/' refused for user 'u'");
  EXPECT_FALSE(p.check(Access::write, "exchange", "anything", "/", "u"));
  EXPECT_TRUE(p.check(Access::read, "queue", "app-orders", "/", "u"));  // "" grants nothing
}

TEST(Permissions, TheDefaultExchangeMatchesAsAmqDefault) {
  const Permissions p(Permission{".*", "^amq\\.default$", ".*"});
  EXPECT_FALSE(p.check(Access::write, "exchange", "", "/", "u"));
  EXPECT_TRUE(p.check(Access::write, "exchange", "amq.direct", "/", "u"));
}

TEST(Permissions, AnInvalidPatternInTheDefinitionsIsRefusedWithAClearError) {
  auto d = Definitions::parse(R"({"users": [{"name": "u", "password": "p"}], "vhosts": [{"name": "/"}],
                                 "permissions": [{"user": "u", "vhost": "/", "configure": "(unclosed"}]})");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().find("invalid permission pattern '(unclosed'"), std::string::npos) << d.error();
}

}  // namespace
}  // namespace firemq
