#include "protocol/bounded_json.h"

#include <gtest/gtest.h>

#include <string>

namespace firemq {
namespace {

std::string nested_arrays(std::size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

TEST(BoundedJson, ReadsADocumentAtTheBound) {
  auto parsed = parse_bounded_json(nested_arrays(64), 64);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_TRUE(parsed->is_array());
}

TEST(BoundedJson, RefusesOneLevelPastTheBound) {
  auto parsed = parse_bounded_json(nested_arrays(65), 64);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error(), "nested deeper than 64 levels");
}

// The attack of issue 27: 50,000 levels in 100 KB, which a recursive reader of the result would overflow on.
TEST(BoundedJson, RefusesAHugeDepthWithoutBuildingIt) {
  std::string objects;
  for (int i = 0; i < 50000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(50000, '}');
  auto parsed = parse_bounded_json(objects, 64);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error(), "nested deeper than 64 levels");
}

TEST(BoundedJson, ADeepDocumentThatIsAlsoBrokenIsReportedAsTooDeep) {
  auto parsed = parse_bounded_json(std::string(100, '['), 64);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error(), "nested deeper than 64 levels");
}

TEST(BoundedJson, ASyntaxErrorSaysWhere) {
  auto parsed = parse_bounded_json(R"({"a": [1, 2,]})", 64);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().find("not JSON: "), std::string::npos) << parsed.error();
  EXPECT_NE(parsed.error().find("line 1, column 13"), std::string::npos) << parsed.error();
}

// Found by fuzz_definitions: nlohmann throws out_of_range, not parse_error, for a number no double holds. Uncaught,
// one management body or definitions file would have ended the broker.
TEST(BoundedJson, ANumberTooLargeForADoubleIsAnError) {
  auto parsed = parse_bounded_json(R"({"x-message-ttl": 1e999999})", 64);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().find("not JSON: "), std::string::npos) << parsed.error();
  EXPECT_NE(parsed.error().find("number overflow"), std::string::npos) << parsed.error();
}

TEST(BoundedJson, TheDefinitionsBoundHoldsAWireDeepValueInTypedJson) {
  EXPECT_EQ(kMaxDefinitionsNesting, 3 * kMaxNesting + 4);
  EXPECT_TRUE(parse_bounded_json(nested_arrays(kMaxDefinitionsNesting), kMaxDefinitionsNesting).ok());
  EXPECT_FALSE(parse_bounded_json(nested_arrays(kMaxDefinitionsNesting + 1), kMaxDefinitionsNesting).ok());
}

}  // namespace
}  // namespace firemq
