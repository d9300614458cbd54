#include "protocol/msgpack_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace firemq {
namespace {

Value round_trip(const Value& v) {
  Bytes bytes;
  encode_value(v, bytes);
  Result<Value> back = decode_value(bytes);
  EXPECT_TRUE(back.ok()) << back.error().msg;
  return back.ok() ? *back : Value();
}

TEST(MsgpackCodec, EveryTypeRoundTripsLosslessly) {
  const Value all(Map{
      {Value("nil"), Value(Nil{})},
      {Value("true"), Value(true)},
      {Value("uint64 max"), Value(std::numeric_limits<std::uint64_t>::max())},
      {Value("int64 min"), Value(std::numeric_limits<std::int64_t>::min())},
      {Value("negative"), Value(-1)},
      {Value("float32"), Value(0.1f)},
      {Value("float64"), Value(0.1)},
      {Value("nan"), Value(std::nan(""))},
      {Value("str"), Value("héllo")},
      {Value("bin"), Value(Bin{{0x00, 0xff}})},
      {Value("ext"), Value(Ext{-3, {1, 2, 3}})},
      {Value("array"), Value(Array{Value(1), Value("two"), Value(Array{})})},
      {Value(42), Value("integer key")},
      {Value("nested"), Value(Map{{Value("a"), Value(Map{})}})},
  });
  EXPECT_EQ(round_trip(all), all);
}

TEST(MsgpackCodec, Float32StaysFloat32) {
  EXPECT_TRUE(round_trip(Value(2.5f)).is<float>());
  EXPECT_TRUE(round_trip(Value(2.5)).is<double>());
}

TEST(MsgpackCodec, FloatsWithIntegralValuesStayFloats) {
  // msgpack-cxx's own packer would write these as integers.
  Bytes bytes;
  encode_value(Value(1.0), bytes);
  EXPECT_EQ(to_hex(bytes), "cb3ff0000000000000");
  EXPECT_TRUE(round_trip(Value(-2.0f)).is<float>());
  EXPECT_TRUE(round_trip(Value(18446744073709551616.0)).is<double>());
}

TEST(MsgpackCodec, NonNegativeSignedFormatsDecodeAsUnsigned) {
  // int8 5, int64 5
  EXPECT_EQ(*decode_value(Bytes{0xd0, 0x05}), Value(std::uint64_t{5}));
  EXPECT_EQ(*decode_value(Bytes{0xd3, 0, 0, 0, 0, 0, 0, 0, 5}), Value(std::uint64_t{5}));
  EXPECT_EQ(*decode_value(Bytes{0xd0, 0xff}), Value(std::int64_t{-1}));
}

Bytes nested_arrays(std::size_t depth) {
  Bytes bytes(depth, 0x91);  // fixarray of one element, nested
  bytes.push_back(0xc0);
  return bytes;
}

TEST(MsgpackCodec, NestingUpToTheLimitIsAccepted) { EXPECT_TRUE(decode_value(nested_arrays(kMaxNesting)).ok()); }

TEST(MsgpackCodec, NestingPastTheLimitIsSyntaxError) {
  Result<Value> v = decode_value(nested_arrays(kMaxNesting + 1));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, 502);
  EXPECT_NE(v.error().msg.find("deeper than 64"), std::string::npos);
}

TEST(MsgpackCodec, HugeDeclaredSizesWithoutTheirBytesAreErrorsNotAllocations) {
  for (const Bytes& bytes : {Bytes{0xdd, 0xff, 0xff, 0xff, 0xff},        // array32 of 4G items
                             Bytes{0xdf, 0xff, 0xff, 0xff, 0xff},        // map32
                             Bytes{0xdb, 0xff, 0xff, 0xff, 0xff},        // str32
                             Bytes{0xc9, 0xff, 0xff, 0xff, 0xff, 0x01},  // ext32, size 0xffffffff
                             Bytes{0xc9, 0xff, 0xff, 0xff, 0xfe, 0x01}}) {
    Result<Value> v = decode_value(bytes);
    ASSERT_FALSE(v.ok()) << to_hex(bytes);
    EXPECT_EQ(v.error().code, 502);
  }
}

TEST(MsgpackCodec, ItemsUpToTheLimitAreAcceptedAndOneMoreIsRefused) {
  auto array_of_nils = [](std::size_t n) {  // array32 of n nils: n + 1 items with the array
    Bytes bytes = {0xdd};
    append_u32_be(bytes, static_cast<std::uint32_t>(n));
    bytes.insert(bytes.end(), n, 0xc0);
    return bytes;
  };
  EXPECT_TRUE(decode_value(array_of_nils(kMaxItems - 1)).ok());
  Result<Value> v = decode_value(array_of_nils(kMaxItems));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, 502);
  EXPECT_NE(v.error().msg.find("more than 65536 items"), std::string::npos);
}

TEST(MsgpackCodec, TrailingBytesAreSyntaxError) {
  Result<Value> v = decode_value(Bytes{0x80, 0xc0});
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().msg.find("1 trailing bytes"), std::string::npos);
}

TEST(MsgpackCodec, NeverUsedByteIsSyntaxError) { EXPECT_FALSE(decode_value(Bytes{0xc1}).ok()); }

}  // namespace
}  // namespace firemq
