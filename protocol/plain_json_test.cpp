// Values as plain JSON (the management API's form), both ways.
#include "protocol/plain_json.h"

#include <gtest/gtest.h>

#include "protocol/msgpack_codec.h"

namespace firemq {
namespace {

using Json = nlohmann::json;

TEST(PlainJson, WritesEachTypeAsRabbitMqsApiDoes) {
  const Value v(Map{{Value("n"), Value(Nil{})},
                    {Value("b"), Value(true)},
                    {Value("u"), Value(std::uint64_t{7})},
                    {Value("i"), Value(-3)},
                    {Value("f"), Value(1.5)},
                    {Value("s"), Value("text")},
                    {Value("bin"), Value(Bin{{'a', 'b', 'c', 'd'}})},
                    {Value("a"), Value(Array{Value(1), Value("x")})}});
  EXPECT_EQ(plain_json(v), Json::parse(R"({"n": null, "b": true, "u": 7, "i": -3, "f": 1.5, "s": "text",
                                           "bin": "YWJjZA==", "a": [1, "x"]})"));
}

TEST(PlainJson, Base64PadsAsRfc4648) {
  EXPECT_EQ(plain_json(Value(Bin{{'a'}})), "YQ==");
  EXPECT_EQ(plain_json(Value(Bin{{'a', 'b'}})), "YWI=");
  EXPECT_EQ(plain_json(Value(Bin{{'a', 'b', 'c'}})), "YWJj");
  EXPECT_EQ(plain_json(Value(Bin{})), "");
}

TEST(PlainJson, ReadsIntegersByTheirSignAndObjectsAsMaps) {
  auto v = value_from_plain_json(Json::parse(R"({"x-max-length": 10, "neg": -1, "f": 0.5, "nested": {"k": [true]}})"));
  ASSERT_TRUE(v) << v.error();
  const Map& m = *v->get_if<Map>();
  EXPECT_EQ(*find(m, "x-max-length"), Value(std::uint64_t{10}));
  EXPECT_EQ(*find(m, "neg"), Value(-1));
  EXPECT_EQ(*find(m, "f"), Value(0.5));
  EXPECT_EQ(*find(m, "nested"), Value(Map{{Value("k"), Value(Array{Value(true)})}}));
}

TEST(PlainJson, AMapMustBeAnObject) {
  EXPECT_TRUE(map_from_plain_json(Json()));  // null: no arguments
  auto bad = map_from_plain_json(Json::array());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "expected an object, got array");
}

// The wire's bounds (msgpack_codec.h) hold for values read from JSON too: a definitions file may nest deeper
// than an HTTP body, but no argument or header built from it is one the wire would have refused.
Json nested_arrays(std::size_t levels) {
  Json v = Json::array();
  for (std::size_t i = 1; i < levels; ++i) v = Json::array({v});
  return v;
}

TEST(PlainJson, AValueMayNestAsDeepAsTheWireAllows) {
  EXPECT_TRUE(value_from_plain_json(nested_arrays(kMaxNesting)).ok());
  auto deep = value_from_plain_json(nested_arrays(kMaxNesting + 1));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error(), "nested deeper than 64 levels");
}

TEST(PlainJson, AMapCountsAsALevel) {
  auto deep = map_from_plain_json(Json{{"x", nested_arrays(kMaxNesting)}});
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error(), "'x': nested deeper than 64 levels");
}

TEST(PlainJson, AValueHoldsNoMoreItemsThanTheWireAllows) {
  EXPECT_TRUE(value_from_plain_json(Json(std::vector<int>(kMaxItems - 1, 0))).ok());
  auto many = value_from_plain_json(Json(std::vector<int>(kMaxItems, 0)));
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error(), "more than 65536 items");
}

}  // namespace
}  // namespace firemq
