#include "protocol/typed_json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace firemq {
namespace {

using Json = nlohmann::json;

// The vector tests exercise the codec on every header; these pin the convention's edges by name.
Value parse_ok(const Json& json) {
  auto value = value_from_typed_json(json);
  EXPECT_TRUE(value.ok()) << json.dump() << ": " << (value.ok() ? "" : value.error());
  return value.ok() ? *value : Value();
}

TEST(TypedJson, EveryTagRoundTrips) {
  const Json json = Json::parse(R"({"$map": [
      [1, null], ["s", true], ["big", {"$int": "18446744073709551615"}], ["neg", {"$int": "-9007199254740992"}],
      ["f32", {"$float32": 1.5}], ["f64", {"$float64": "-Infinity"}], ["bin", {"$bin": "00ff"}],
      ["ext", {"$ext": [-1, "0102"]}], ["list", [1, "two", {"plain": 3}]]]})");
  EXPECT_EQ(typed_json_from_value(parse_ok(json)), json);
}

TEST(TypedJson, IntegersBeyondTwoToThe53AreTagged) {
  const std::int64_t safe = (std::int64_t{1} << 53) - 1;
  EXPECT_EQ(typed_json_from_value(Value(safe)), Json(safe));
  EXPECT_EQ(typed_json_from_value(Value(static_cast<std::uint64_t>(safe) + 1)), Json({{"$int", "9007199254740992"}}));
  EXPECT_EQ(typed_json_from_value(Value(std::numeric_limits<std::int64_t>::min())),
            Json({{"$int", "-9223372036854775808"}}));
}

TEST(TypedJson, ADollarKeyMakesAMapTagged) {
  const Value map(Map{{Value("$x"), Value(1)}});
  EXPECT_EQ(typed_json_from_value(map), Json::parse(R"({"$map": [["$x", 1]]})"));
  EXPECT_FALSE(value_from_typed_json(Json::parse(R"({"$x": 1, "y": 2})")).ok());
}

TEST(TypedJson, WhatBreaksTheConventionIsRefusedWithAReason) {
  auto bare_float = value_from_typed_json(Json(1.5));
  ASSERT_FALSE(bare_float.ok());
  EXPECT_NE(bare_float.error().find("$float64"), std::string::npos);
  EXPECT_FALSE(value_from_typed_json(Json::parse(R"({"$int": "x"})")).ok());
  EXPECT_FALSE(value_from_typed_json(Json::parse(R"({"$bin": "zz"})")).ok());
  EXPECT_FALSE(value_from_typed_json(Json::parse(R"({"$map": [[1]]})")).ok());
}

}  // namespace
}  // namespace firemq
