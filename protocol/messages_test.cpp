#include "protocol/messages.h"

#include <gtest/gtest.h>

#include "protocol/msgpack_codec.h"

namespace firemq {
namespace {

Map sample_map() {
  return Map{{Value("x-max-length"), Value(10)}, {Value("note"), Value("é")}, {Value("neg"), Value(-5)}};
}

Props sample_props() {
  return Props{Map{{Value("content_type"), Value("text/plain")},
                   {Value("expiration"), Value(std::uint64_t{60000})},
                   {Value("priority"), Value(std::uint64_t{5})},
                   {Value("user_id"), Value("guest")},
                   {Value("x-unknown"), Value(Bin{{0xff, 0x00}})}}};
}

// One message per op with every field set to a non-zero value.
std::vector<Message> every_op_fully_set() {
  std::vector<Message> all;
  all.push_back(op::Hello{1, "dev", {"plain", "guest", "secret"}, 30, sample_map(), {"confirms", "credit"}});
  all.push_back(op::Welcome{1, {"firemq", "0.1.0"}, "conn-1", 30, 16777216, {"confirms", "ttl"}});
  all.push_back(op::Ping{});
  all.push_back(op::Pong{});
  all.push_back(op::Close{200, "bye"});
  all.push_back(op::Ok{7, "amq.gen-1", 3, 2, true});
  all.push_back(op::Error{7, 404, "no queue 'q'", true});
  all.push_back(op::Flow{true});
  all.push_back(op::DeclareExchange{8, "logs", "topic", true, true, true, true, sample_map()});
  all.push_back(op::DeleteExchange{9, "logs", true});
  all.push_back(op::DeclareQueue{10, "q", true, true, true, true, sample_map()});
  all.push_back(op::DeleteQueue{11, "q", true, true});
  all.push_back(op::PurgeQueue{12, "q"});
  op::Bind bind;
  static_cast<op::BindFields&>(bind) = {13, "logs", "q", "x2", "a.*", sample_map()};
  all.push_back(bind);
  op::Unbind unbind;
  static_cast<op::BindFields&>(unbind) = {14, "logs", "q", "x2", "a.#", sample_map()};
  all.push_back(unbind);
  all.push_back(op::Publish{1, "logs", "a.b", true, true, sample_props(), sample_map()});
  all.push_back(op::Confirm{5, 6, true, 406, "queue full"});
  all.push_back(op::Return{1, 312, "NO_ROUTE", "logs", "a.b", sample_props(), sample_map()});
  all.push_back(op::Subscribe{15, 1, "q", 100, true, true, "my-tag", sample_map()});
  all.push_back(op::Unsubscribe{16, 1});
  all.push_back(op::Credit{1, 50});
  all.push_back(op::Deliver{1, 42, true, "logs", "a.b", sample_props(), sample_map()});
  all.push_back(op::Cancelled{1, 404, "queue deleted"});
  all.push_back(op::Ack{42, true});
  all.push_back(op::Nack{42, true, true});
  all.push_back(op::Get{17, "q", true});
  all.push_back(op::GetOk{17, 43, true, "logs", "a.b", 9, sample_props(), sample_map()});
  return all;
}

Bytes encode_map_bytes(const Map& map) {
  Bytes out;
  encode_map(map, out);
  return out;
}

TEST(Messages, EveryOpRoundTripsThroughAFrame) {
  const std::vector<Message> all = every_op_fully_set();
  ASSERT_EQ(all.size(), kOps.size());
  const Bytes payload = {0xff, 0xfe, 0x00, 0x80};
  for (const Message& m : all) {
    const OpInfo* info = find_op(static_cast<std::uint8_t>(op_of(m)));
    const Bytes frame = encode_frame(m, info->has_payload ? ByteView(payload) : ByteView());
    FrameDecoder decoder(StreamSide::client, kDefaultMaxFrame);
    auto step = decoder.feed(frame);
    ASSERT_EQ(step.state, FrameDecoder::State::frame) << info->name;
    const RawFrame raw = decoder.take_frame();
    Result<Message> back = decode_frame(raw);
    ASSERT_TRUE(back.ok()) << info->name << ": " << back.error().msg;
    EXPECT_EQ(*back, m) << info->name;
    EXPECT_EQ(raw.payload().size(), info->has_payload ? payload.size() : 0u);
  }
}

// A deliver encoded from borrowed fields is byte for byte the deliver op's frame, with every field set and with
// every field zero (left out alike).
TEST(Messages, ADeliverViewAppendsTheSameFrameAsTheDeliverOp) {
  const Props props{Map{{Value("priority"), Value(3)}, {Value("content_type"), Value("text/plain")}}};
  const Map headers{{Value("h"), Value(std::uint64_t{1})}};
  const Map no_headers;
  const Props no_props;
  const Bytes payload = {0x00, 0x01, 0xff};
  for (const DeliverView& view :
       {DeliverView{7, 9, true, "ex", "key", props, headers}, DeliverView{0, 0, false, "", "", no_props, no_headers}}) {
    Bytes from_view = {0xaa};
    append_frame(from_view, view, payload);
    Bytes from_op = {0xaa};
    append_frame(from_op, Message(view.copy()), payload);
    EXPECT_EQ(from_view, from_op);
  }
}

TEST(Messages, FramesAppendedToOneBufferDecodeBackToBackWithTheirPayloads) {
  const std::vector<Message> all = every_op_fully_set();
  const Bytes payload = {0xff, 0xfe, 0x00, 0x80};
  Bytes buffer = {0x01, 0x02};  // bytes already in the buffer stay as they are
  for (const Message& m : all) {
    const bool has_payload = find_op(static_cast<std::uint8_t>(op_of(m)))->has_payload;
    append_frame(buffer, m, has_payload ? ByteView(payload) : ByteView());
  }
  ASSERT_EQ(buffer[0], 0x01);
  ASSERT_EQ(buffer[1], 0x02);
  FrameDecoder decoder(StreamSide::client, kDefaultMaxFrame);
  ByteView rest = ByteView(buffer).subspan(2);
  for (const Message& m : all) {
    auto step = decoder.feed(rest);
    ASSERT_EQ(step.state, FrameDecoder::State::frame) << op_name(op_of(m));
    rest = rest.subspan(step.consumed);
    const RawFrame raw = decoder.take_frame();
    EXPECT_EQ(Bytes(raw.header().begin(), raw.header().end()), encode_header(m))
        << "the header encoded in place, as encode_header writes it";
    Result<Message> back = decode_frame(raw);
    ASSERT_TRUE(back.ok()) << back.error().msg;
    EXPECT_EQ(*back, m);
  }
  EXPECT_TRUE(rest.empty());
}

TEST(Messages, EveryFieldOfAFullySetMessageIsEncoded) {
  const op::Publish publish = std::get<op::Publish>(every_op_fully_set()[15]);
  const Map header = header_to_map(publish);
  EXPECT_EQ(header.size(), 7u);
  EXPECT_NE(find(header, "persistent"), nullptr);
}

template <std::size_t... I>
void expect_every_op_decodes_an_empty_header_to_zero_values(ByteView header, std::index_sequence<I...>) {
  auto check = [&](auto zero) {
    using T = decltype(zero);
    Result<Message> m = decode_header(static_cast<std::uint8_t>(T::kOp), header);
    ASSERT_TRUE(m.ok()) << op_name(T::kOp);
    EXPECT_EQ(std::get<T>(*m), T{}) << op_name(T::kOp);
  };
  (check(std::variant_alternative_t<I, Message>{}), ...);
}

TEST(Messages, EveryOpDecodesHlenZeroToZeroValues) {
  expect_every_op_decodes_an_empty_header_to_zero_values({}, std::make_index_sequence<std::variant_size_v<Message>>{});
}

TEST(Messages, EveryOpDecodesAnEmptyMapToZeroValues) {
  const Bytes empty_map = {0x80};
  expect_every_op_decodes_an_empty_header_to_zero_values(empty_map,
                                                         std::make_index_sequence<std::variant_size_v<Message>>{});
}

TEST(Messages, ZeroValuedFieldsAreLeftOut) {
  EXPECT_EQ(to_hex(encode_header(op::Ok{7, "", 0, 0, false})), "81a3726964"
                                                               "07");
  EXPECT_EQ(to_hex(encode_header(op::Ping{})), "80");
}

TEST(Messages, UnknownKeysAreIgnored) {
  const Bytes header = encode_map_bytes(
      Map{{Value("seq"), Value(3)}, {Value("x-future"), Value(Array{Value(1), Value(Map{})})}});
  Result<Message> m = decode_header(0x20, header);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<op::Publish>(*m).seq, 3u);
}

TEST(Messages, NilReadsAsAnOmittedField) {
  const Bytes header = encode_map_bytes(Map{{Value("code"), Value(Nil{})}, {Value("msg"), Value("bye")}});
  Result<Message> m = decode_header(0x05, header);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<op::Close>(*m), (op::Close{0, "bye"}));
}

// decode_header reads common headers straight from their bytes and gives the rest to decode_header_generic;
// whichever way a header goes, the result must be the generic one's, message or error.
void expect_both_ways_agree(std::uint8_t op, const Bytes& header) {
  const Result<Message> fast = decode_header(op, header);
  const Result<Message> generic = decode_header_generic(op, header);
  ASSERT_EQ(fast.ok(), generic.ok()) << to_hex(header);
  if (fast.ok()) {
    EXPECT_EQ(*fast, *generic) << to_hex(header);
  } else {
    EXPECT_EQ(fast.error(), generic.error()) << to_hex(header) << ": " << fast.error().msg;
  }
}

TEST(Messages, HeadersReadStraightFromTheirBytesDecodeAsTheGenericWayDoes) {
  for (const Message& m : every_op_fully_set()) {
    const auto op = static_cast<std::uint8_t>(op_of(m));
    EXPECT_TRUE(scan_header(op, encode_header(m))) << op_name(op_of(m)) << ": a plain header takes the fast path";
    expect_both_ways_agree(op, encode_header(m));
  }
  const std::vector<std::pair<std::uint8_t, std::string>> headers = {
      {0x20, "83a3736571cd0102a36b6579a171aa70657273697374656e74c3"},  // seq as uint16, key, persistent
      {0x20, "81a3736571d001"},                                // seq as int8 holding 1: a uint to the generic way
      {0x20, "81a3736571c0"},                                  // nil: an omitted field
      {0x20, "82a373657101a373657102"},                        // seq twice
      {0x20, "8101a3736571"},                                  // a key that is no str
      {0x20, "81a3736571ff"},                                  // seq negative
      {0x20, "81a3736571"},                                    // cut short
      {0x20, "81a373657101c0"},                                // a trailing byte
      {0x20, "81a570726f707381aa657870697261746f696ea23130"},  // a misspelt prop: unknown, kept
      {0x20, "81a570726f707381aa65787069726174696f6ea23130"},  // expiration as str: a wrong type
      {0x20, "81a570726f707381a87072696f72697479c0"},          // a prop that is nil
      {0x20, "81a7686561646572738101c0"},                      // headers with an int key and a nil value
      {0x20, "81a178c1"},                                // an unknown field holding the byte MessagePack never uses
      {0x20, "81a178c9ffffffff01"},                      // an ext 32 that declares more bytes than there are
      {0x20, "81a178d40102"},                            // an unknown fixext 1
      {0x01, "81a4617574688101a0"},                      // auth with an int key
      {0x01, "81a46361707392a1610c"},                    // caps with an int in it
      {0x01, "a3766572"},                                // no map at all
      {0x33, "82a3737562cf0000000000000009a374616707"},  // uint64
      {0x77, "81a3726964cc07"},                          // an unknown op
  };
  for (const auto& [op, hex] : headers) expect_both_ways_agree(op, *from_hex(hex));
  EXPECT_TRUE(scan_header(0x20, *from_hex(headers[0].second))) << "uint16, str and bool, read straight";
  EXPECT_TRUE(scan_header(0x20, *from_hex(headers[8].second))) << "an unknown prop, read straight";
  for (std::size_t i = 1; i < 8; ++i) {
    EXPECT_FALSE(scan_header(0x20, *from_hex(headers[i].second))) << "given to the generic way: " << headers[i].second;
  }
  // Deep and large: past the scanner's bounds, still within the generic decoder's.
  Bytes deep = *from_hex("81a178");
  for (int i = 0; i < 40; ++i) deep.push_back(0x91);
  deep.push_back(0x01);
  expect_both_ways_agree(0x20, deep);
  Bytes large = *from_hex("81a178dd00002000");
  large.resize(large.size() + 0x2000, 0x01);
  expect_both_ways_agree(0x20, large);
}

struct WrongType {
  std::uint8_t op;
  Map header;
  std::string field;
};

TEST(Messages, WrongFieldTypeIsSyntaxErrorNamingTheField) {
  const std::vector<WrongType> cases = {
      {0x20, {{Value("seq"), Value("1")}}, "'seq'"},
      {0x01, {{Value("ver"), Value(1.0)}}, "'ver'"},
      {0x05, {{Value("code"), Value(-1)}}, "'code'"},
      {0x12, {{Value("durable"), Value(1)}}, "'durable'"},
      {0x01, {{Value("auth"), Value(Map{{Value("user"), Value(5)}})}}, "'auth.user'"},
      {0x01, {{Value("caps"), Value("confirms")}}, "'caps'"},
      {0x01, {{Value("caps"), Value(Array{Value("confirms"), Value(1)})}}, "'caps'"},
      {0x20, {{Value("props"), Value(Map{{Value("expiration"), Value("60000")}})}}, "'props.expiration'"},
      {0x20, {{Value("headers"), Value(Array{})}}, "'headers'"},
  };
  for (const WrongType& c : cases) {
    Result<Message> m = decode_header(c.op, encode_map_bytes(c.header));
    ASSERT_FALSE(m.ok()) << c.field;
    EXPECT_EQ(m.error().code, 502) << c.field;
    EXPECT_TRUE(m.error().fatal);
    EXPECT_NE(m.error().msg.find(c.field), std::string::npos) << m.error().msg;
  }
}

TEST(Messages, AKnownFieldSentTwiceIsSyntaxError) {
  const Bytes header = encode_map_bytes(Map{{Value("seq"), Value(1)}, {Value("seq"), Value(2)}});
  Result<Message> m = decode_header(0x20, header);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, 502);
  EXPECT_NE(m.error().msg.find("'seq' appears twice"), std::string::npos);
}

TEST(Messages, ErrorAboutAFieldEchoesTheRequestsRid) {
  const Bytes header = encode_map_bytes(Map{{Value("rid"), Value(9)}, {Value("name"), Value(5)}});
  Result<Message> m = decode_header(0x12, header);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().rid, 9u);
}

TEST(Messages, HeaderThatIsNotAMapIsSyntaxError) {
  for (const Bytes& header :
       {Bytes{0x90}, Bytes{0xa1, 'x'}, Bytes{0x05}, Bytes{0xc1}, Bytes{0x82, 0xa1, 'a', 1}, Bytes{0x80, 0x00}}) {
    Result<Message> m = decode_header(0x03, header);
    ASSERT_FALSE(m.ok()) << to_hex(header);
    EXPECT_EQ(m.error().code, 502) << to_hex(header);
    EXPECT_NE(m.error().msg.find("header is not a MessagePack map"), std::string::npos);
  }
}

TEST(Messages, NonStringKeyIsSyntaxError) {
  Result<Message> m = decode_header(0x03, Bytes{0x81, 0x01, 0x02});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, 502);
  EXPECT_NE(m.error().msg.find("keys must be str"), std::string::npos);
}

TEST(Messages, UnknownOpIsNotImplementedAndNotFatal) {
  for (std::uint8_t code : {0x00, 0x09, 0x39, 0x7f, 0xff}) {
    Result<Message> m = decode_header(code, Bytes{0x81, 0xa3, 'r', 'i', 'd', 0x04});
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().code, 540);
    EXPECT_FALSE(m.error().fatal);
    EXPECT_EQ(m.error().rid, 4u);
  }
}

TEST(Messages, PayloadOnAnOpThatCarriesNoneIsFrameError) {
  Result<Message> m = decode_frame(RawFrame(Bytes{0x03, 0, 0, 0, 0, 0xaa}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, 501);
  EXPECT_TRUE(m.error().fatal);
}

TEST(Messages, PropsKeepEveryKeyAndTypeTheyWereSent) {
  Props props = sample_props();
  props.entries.push_back({Value("f32"), Value(1.5f)});
  props.entries.push_back({Value(7), Value(Ext{3, {1, 2}})});
  const op::Deliver deliver{1, 1, false, "", "q", props, {}};
  Result<Message> back = decode_header(0x33, encode_header(deliver));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<op::Deliver>(*back).props, props);
}

}  // namespace
}  // namespace firemq
