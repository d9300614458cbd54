// Passwords at rest (password_hash.h): RabbitMQ's salted SHA-256, read in either form, kept and written only as
// the hash.
#include "reference-broker/access/definitions.h"

#include <gtest/gtest.h>

namespace firemq {
namespace {

Definitions parse_ok(const std::string& text) {
  auto parsed = Definitions::parse(text);
  EXPECT_TRUE(parsed) << (parsed ? "" : parsed.error());
  return parsed ? *parsed : Definitions();
}

// RabbitMQ's documentation ("Credentials and Passwords", computing a password hash) gives this example: salt
// 0x908DC60A, password "test12". Checked independently with
//   /usr/bin/python3 -c "import hashlib,base64; s=bytes.fromhex('908dc60a');
//     print(base64.b64encode(s+hashlib.sha256(s+b'test12').digest()).decode())"
constexpr const char* kTest12Hash = "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR";

TEST(PasswordHash, MatchesRabbitMqsSaltedSha256) {
  EXPECT_EQ(encode_password_hash(hash_password({0x90, 0x8d, 0xc6, 0x0a}, "test12")), kTest12Hash);
  auto decoded = decode_password_hash(kTest12Hash, kSha256HashingAlgorithm);
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(password_matches(*decoded, "test12"));
  EXPECT_FALSE(password_matches(*decoded, "test13"));
}

TEST(PasswordHash, AFreshSaltIsRandom) {
  auto a = hash_new_password("guest");
  auto b = hash_new_password("guest");
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->salt, b->salt) << "two hashes of one password differ (a 1 in 2^32 chance of a false failure)";
  EXPECT_TRUE(password_matches(*a, "guest"));
}

TEST(Definitions, AHashFromRabbitMqsExportLogsIn) {
  Definitions d = parse_ok(std::string(R"({"users": [{"name": "u", "password_hash": ")") + kTest12Hash +
                           R"(", "hashing_algorithm": "rabbit_password_hashing_sha256"}], "vhosts": []})");
  EXPECT_NE(d.authenticate("u", "test12"), nullptr);
  EXPECT_EQ(d.authenticate("u", "test1"), nullptr);
}

TEST(Definitions, AHashWithoutAnAlgorithmIsSha256AsRabbitMqsDefault) {
  Definitions d = parse_ok(std::string(R"({"users": [{"name": "u", "password_hash": ")") + kTest12Hash + R"("}]})");
  EXPECT_NE(d.authenticate("u", "test12"), nullptr);
}

TEST(Definitions, AnotherHashingAlgorithmIsRefusedByName) {
  auto parsed = Definitions::parse(std::string(R"({"users": [{"name": "u", "password_hash": ")") + kTest12Hash +
                                   R"(", "hashing_algorithm": "rabbit_password_hashing_md5"}]})");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().find("user 'u'"), std::string::npos) << parsed.error();
  EXPECT_NE(parsed.error().find("rabbit_password_hashing_md5"), std::string::npos) << parsed.error();
}

TEST(Definitions, AMalformedHashIsRefused) {
  auto parsed = Definitions::parse(R"({"users": [{"name": "u", "password_hash": "not base64!"}]})");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().find("password_hash"), std::string::npos) << parsed.error();
}

TEST(Definitions, AClearPasswordIsWrittenOnlyAsItsHash) {
  Definitions d = parse_ok(R"({"users": [{"name": "guest", "password": "s3cret-guest"}], "vhosts": [{"name": "/"}]})");
  const nlohmann::json written = d.to_json();
  const std::string text = written.dump();
  EXPECT_EQ(text.find("s3cret-guest"), std::string::npos) << text;
  const nlohmann::json& user = written.at("users").at(0);
  EXPECT_FALSE(user.contains("password")) << text;
  EXPECT_EQ(user.at("hashing_algorithm"), kSha256HashingAlgorithm);
  EXPECT_EQ(user.at("password_hash").get<std::string>().size(), 48u);
  // Read back (a restart without --definitions), the same password still logs in.
  Definitions again = parse_ok(text);
  EXPECT_NE(again.authenticate("guest", "s3cret-guest"), nullptr);
  EXPECT_EQ(again.authenticate("guest", "guest"), nullptr);
}

TEST(Definitions, AUserWithoutAPasswordCannotLogInWithOne) {
  Definitions d = parse_ok(R"({"users": [{"name": "a"}, {"name": "b", "password_hash": ""}]})");
  EXPECT_EQ(d.authenticate("a", ""), nullptr);
  EXPECT_EQ(d.authenticate("b", ""), nullptr);
  EXPECT_EQ(d.to_json().at("users").at(0).at("password_hash"), "");
}

TEST(Definitions, TheDefaultGuestLogsInWithGuest) {
  auto d = Definitions::defaults();
  ASSERT_TRUE(d);
  EXPECT_NE(d->authenticate("guest", "guest"), nullptr);
  EXPECT_EQ(d->authenticate("guest", "Guest"), nullptr);
  EXPECT_EQ(d->authenticate("nobody", "guest"), nullptr);
}

}  // namespace
}  // namespace firemq
