// The spec's "Interoperability with AMQP 0-9-1" table, row by row, in both directions.
#include "reference-broker/amqp/amqp_interop.h"

#include <gtest/gtest.h>

namespace firemq {
namespace {

using amqp::FieldValue;

TEST(AmqpInterop, PersistentIsDeliveryModeTwo) {
  amqp::ContentHeader h;
  h.set("delivery_mode", std::uint64_t{2});
  EXPECT_TRUE(from_amqp_properties(h)->persistent);
  h.set("delivery_mode", std::uint64_t{1});
  EXPECT_FALSE(from_amqp_properties(h)->persistent);
}

TEST(AmqpInterop, APersistentMessageIsDeliveredWithDeliveryModeTwo) {
  EXPECT_EQ(*to_amqp_properties({}, {}, true).get("delivery_mode"), amqp::Arg(std::uint64_t{2}));
  EXPECT_EQ(to_amqp_properties({}, {}, false).get("delivery_mode"), nullptr);
}

TEST(AmqpInterop, ExpirationIsMillisecondsAsADecimalString) {
  amqp::ContentHeader h;
  h.set("expiration", std::string("60000"));
  auto c = from_amqp_properties(h);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->props.get("expiration"), Value(std::uint64_t{60000}));
  auto back = to_amqp_properties(c->props, {});
  EXPECT_EQ(*back.get("expiration"), amqp::Arg(std::string("60000")));
}

TEST(AmqpInterop, ExpirationThatIsNotADecimalNumberIs406) {
  for (const char* bad : {"-1", "1.5", "soon", ""}) {
    amqp::ContentHeader h;
    h.set("expiration", std::string(bad));
    auto c = from_amqp_properties(h);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.error().code, 406);
  }
}

TEST(AmqpInterop, MessagePackTypesBecomeTheTablesTypes) {
  const Map headers = {{Value("nil"), Value(Nil{})},
                       {Value("bool"), Value(true)},
                       {Value("int"), Value(-7)},
                       {Value("uint"), Value(std::uint64_t{7})},
                       {Value("float"), Value(2.5)},
                       {Value("str"), Value("s")},
                       {Value("bin"), Value(Bin{{1, 2}})},
                       {Value("array"), Value(Array{Value(1)})},
                       {Value("map"), Value(Map{{Value("k"), Value("v")}})}};
  const amqp::FieldTable table = to_amqp_table(headers);
  std::string letters;
  for (const auto& e : table) letters += e.value.type_letter();
  EXPECT_EQ(letters, "VtlldSxAF");           // nil, bool, int, int, float, str, bin, array, map
  EXPECT_EQ(to_firemq_map(table), headers);  // and back, unchanged
}

TEST(AmqpInterop, TableTypesBecomeMessagePack) {
  const amqp::FieldTable table = {{"V", amqp::Void{}},
                                  {"t", false},
                                  {"b", std::int8_t{-1}},
                                  {"B", std::uint8_t{1}},
                                  {"s", std::int16_t{-2}},
                                  {"u", std::uint16_t{2}},
                                  {"I", std::int32_t{-3}},
                                  {"i", std::uint32_t{3}},
                                  {"l", std::int64_t{-4}},
                                  {"f", 0.5f},
                                  {"d", 0.25},
                                  {"S", "text"},
                                  {"x", amqp::ByteArray{{9}}},
                                  {"A", amqp::FieldArray{"a"}},
                                  {"F", amqp::FieldTable{{"k", true}}}};
  const Map expected = {{Value("V"), Value(Nil{})},
                        {Value("t"), Value(false)},
                        {Value("b"), Value(-1)},
                        {Value("B"), Value(1)},
                        {Value("s"), Value(-2)},
                        {Value("u"), Value(2)},
                        {Value("I"), Value(-3)},
                        {Value("i"), Value(3)},
                        {Value("l"), Value(-4)},
                        {Value("f"), Value(0.5f)},
                        {Value("d"), Value(0.25)},
                        {Value("S"), Value("text")},
                        {Value("x"), Value(Bin{{9}})},
                        {Value("A"), Value(Array{Value("a")})},
                        {Value("F"), Value(Map{{Value("k"), Value(true)}})}};
  EXPECT_EQ(to_firemq_map(table), expected);
}

TEST(AmqpInterop, DecimalAndTimestampBecomeFloatAndUint) {
  EXPECT_EQ(to_firemq_value(FieldValue(amqp::Decimal{2, 314})), Value(3.14));
  EXPECT_EQ(to_firemq_value(FieldValue(amqp::Timestamp{1600000000})), Value(std::uint64_t{1600000000}));
}

TEST(AmqpInterop, SharedPropertiesKeepTheirNames) {
  amqp::ContentHeader h;
  for (const char* name :
       {"content_type", "content_encoding", "correlation_id", "reply_to", "message_id", "type", "user_id", "app_id"}) {
    h.set(name, std::string(name) + "-value");
  }
  h.set("priority", std::uint64_t{5}).set("timestamp", std::uint64_t{1600000000});
  auto c = from_amqp_properties(h);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->props.get("reply_to"), Value("reply_to-value"));
  EXPECT_EQ(*c->props.get("priority"), Value(std::uint64_t{5}));
  EXPECT_EQ(*c->props.get("timestamp"), Value(std::uint64_t{1600000000}));
  EXPECT_EQ(to_amqp_properties(c->props, {}), h);
}

TEST(AmqpInterop, UintBeyondInt64BecomesDoubleAndExtBecomesBytes) {
  EXPECT_EQ(to_amqp_value(Value(UINT64_MAX)), FieldValue(static_cast<double>(UINT64_MAX)));
  EXPECT_EQ(to_amqp_value(Value(Ext{5, {1}})), FieldValue(amqp::ByteArray{{1}}));
}

TEST(AmqpInterop, ALongStringOrNameThatIsNotUtf8BecomesBinAndBackTheSameBytes) {
  const std::string bytes("\xff\xfe", 2);
  const amqp::FieldTable table{{"k", FieldValue(bytes)}, {bytes, FieldValue(std::string("v"))}};
  const Map fire = to_firemq_map(table);
  ASSERT_EQ(fire.size(), 2u);
  EXPECT_EQ(fire[0].value, Value(Bin{{0xff, 0xfe}}));
  EXPECT_EQ(fire[1].key, Value(Bin{{0xff, 0xfe}}));
  const amqp::FieldTable back = to_amqp_table(fire);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].name, bytes);
  EXPECT_EQ(to_firemq_value(FieldValue(std::string("caf\xc3\xa9"))), Value(std::string("caf\xc3\xa9")));
}

TEST(AmqpInterop, XDeathTimeIsATimestampForAmqpConsumers) {
  Map death{{Value("time"), Value(std::uint64_t{1700000000})},
            {Value("original-expiration"), Value(std::uint64_t{50})}};
  Map headers{{Value("x-death"), Value(Array{Value(death)})}};
  const auto h = to_amqp_properties({}, headers);
  const auto& table = std::get<amqp::FieldTable>(*h.get("headers"));
  const auto& entry = std::get<amqp::FieldTable>(std::get<amqp::FieldArray>(table[0].value.v)[0].v);
  EXPECT_EQ(entry[0].value, FieldValue(amqp::Timestamp{1700000000}));
  EXPECT_EQ(entry[1].value, FieldValue(std::string("50")));
}

TEST(AmqpInterop, HeadersKeepTheTypesTheirAmqpPublisherSentWhileUnchanged) {
  const amqp::FieldTable sent{{"small", FieldValue(std::int8_t{-5})},
                              {"when", FieldValue(amqp::Timestamp{17})},
                              {"changed", FieldValue(std::uint16_t{7})}};
  Map headers = to_firemq_map(sent);
  headers[2].value = Value(std::uint64_t{8});                    // changed on the way
  headers.push_back({Value("added"), Value(std::uint64_t{9})});  // added on the way (x-death)
  const auto h = to_amqp_properties({}, headers, false, &sent);
  const auto& table = std::get<amqp::FieldTable>(*h.get("headers"));
  ASSERT_EQ(table.size(), 4u);
  EXPECT_EQ(table[0].value, FieldValue(std::int8_t{-5}));
  EXPECT_EQ(table[1].value, FieldValue(amqp::Timestamp{17}));
  EXPECT_EQ(table[2].value, FieldValue(std::int64_t{8}));  // the interop table's type for what changed
  EXPECT_EQ(table[3].value, FieldValue(std::int64_t{9}));
}

}  // namespace
}  // namespace firemq
