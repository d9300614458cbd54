// The AMQP 0-9-1 codec against bytes from a real client: the *_from_pika constants below are what pika 1.3
// (Debian's python3-pika) marshals for the methods named, produced by pika.frame.Method(...).marshal().
#include <gtest/gtest.h>

#include <set>

#include "protocol/amqp/content.h"
#include "protocol/amqp/frame.h"
#include "protocol/amqp/message_methods.h"
#include "protocol/amqp/methods.h"

namespace firemq::amqp {
namespace {

Bytes hex(std::string_view h) { return *from_hex(h); }

// queue.declare(queue="q1", durable=True, arguments={x-max-length: 10, flag: True, name: "abc",
// nested: {a: [1, "b"]}, bytes: b"\0\1", dec: Decimal("1.5"), ts: 2020-01-01, none: None, big: 2**40}), channel 1
constexpr std::string_view kQueueDeclareFromPika =
    "010001000000880032000a0000027131020000007a0c782d6d61782d6c656e677468490000000a04666c61677401046e616d6553000000"
    "03616263066e657374656446000000120161410000000b4900000001530000000162056279746573780000000200010364656344010000"
    "000f02747354000000005e0be100046e6f6e6556036269676c0000010000000000ce";
// basic.publish(exchange="ex", routing_key="rk", mandatory=True), its content header (text/plain, delivery_mode 2,
// expiration "60000", headers {k: "v", n: -5}, priority 3, timestamp 1600000000, message_id "m1") and body "hello"
constexpr std::string_view kPublishFromPika = "0100010000000d003c0028000002657802726b01ce";
constexpr std::string_view kHeaderFromPika =
    "0200010000003f003c00000000000000000005b9c00a746578742f706c61696e0000000f016b530000000176016e49fffffffb0203053630"
    "303030026d31000000005f5e1000ce";
constexpr std::string_view kBodyFromPika = "0300010000000568656c6c6fce";
// connection.start-ok with client properties {product: "pika", capabilities: {publisher_confirms: True}}, PLAIN
constexpr std::string_view kStartOkFromPika =
    "0100000000005c000a000b000000380770726f64756374530000000470696b610c6361706162696c69746965734600000015127075626c"
    "69736865725f636f6e6669726d73740105504c41494e0000000c00677565737400677565737405656e5f5553ce";
// basic.nack(delivery_tag=7, multiple=True, requeue=False)
constexpr std::string_view kNackFromPika = "0100010000000d003c0078000000000000000701ce";

// Feeds every byte separately: the decoder must not care how the stream is cut.
std::vector<Frame> decode_all(const Bytes& bytes, bool expect_protocol_header = false) {
  FrameDecoder decoder(expect_protocol_header);
  decoder.set_frame_max(131072);
  std::vector<Frame> frames;
  for (std::uint8_t b : bytes) {
    auto step = decoder.feed(ByteView(&b, 1));
    EXPECT_EQ(step.consumed, 1u);
    EXPECT_NE(step.state, FrameDecoder::State::error) << decoder.error().msg;
    if (step.state == FrameDecoder::State::frame) frames.push_back(decoder.take_frame());
  }
  return frames;
}

Method method_of(std::string_view frame_hex) {
  auto frames = decode_all(hex(frame_hex));
  EXPECT_EQ(frames.size(), 1u);
  auto m = decode_method(frames.at(0).payload);
  EXPECT_TRUE(m.ok()) << m.error().msg;
  return *m;
}

TEST(AmqpFrame, ProtocolHeaderThenFramesByteByByte) {
  Bytes stream(kProtocolHeader.begin(), kProtocolHeader.end());
  for (auto h : {kPublishFromPika, kHeaderFromPika, kBodyFromPika}) {
    Bytes f = hex(h);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  auto frames = decode_all(stream, true);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].type, FrameType::method);
  EXPECT_EQ(frames[1].type, FrameType::header);
  EXPECT_EQ(frames[2].type, FrameType::body);
  EXPECT_EQ(frames[2].channel, 1);
  EXPECT_EQ(frames[2].payload, Bytes({'h', 'e', 'l', 'l', 'o'}));
}

TEST(AmqpFrame, AnotherProtocolHeaderIsRefusedAfterItsEightBytes) {
  FrameDecoder decoder;
  const Bytes old = {'A', 'M', 'Q', 'P', 1, 1, 0, 9};
  auto first = decoder.feed(ByteView(old).first(7));
  EXPECT_EQ(first.state, FrameDecoder::State::need_more);
  EXPECT_EQ(decoder.feed(ByteView(old).subspan(7)).state, FrameDecoder::State::bad_protocol_header);
  FrameDecoder http;
  EXPECT_EQ(http.feed(as_bytes("GET / HTTP/1.1\r\n")).state, FrameDecoder::State::bad_protocol_header);
}

TEST(AmqpFrame, WrongFrameEndIsFrameError) {
  Bytes f = hex(kBodyFromPika);
  f.back() = 0x00;
  FrameDecoder decoder(false);
  EXPECT_EQ(decoder.feed(f).state, FrameDecoder::State::error);
  EXPECT_EQ(decoder.error().code, 501);
  EXPECT_TRUE(decoder.error().fatal);
}

TEST(AmqpFrame, FrameLargerThanFrameMaxIsRefusedFromItsHeader) {
  FrameDecoder decoder(false);                    // frame-min-size until tune-ok
  const Bytes header = {3, 0, 1, 0, 0, 0x10, 0};  // a body frame of 4096 bytes: 4104 with the overhead
  EXPECT_EQ(decoder.feed(header).state, FrameDecoder::State::error);
  EXPECT_EQ(decoder.error().code, 501);
  EXPECT_NE(decoder.error().msg.find("frame-max 4096"), std::string::npos) << decoder.error().msg;
}

TEST(AmqpFrame, UnknownFrameTypeIsFrameError) {
  FrameDecoder decoder(false);
  EXPECT_EQ(decoder.feed(Bytes{4, 0, 0, 0, 0, 0, 0, 0xce}).state, FrameDecoder::State::error);
  EXPECT_EQ(decoder.error().code, 501);
}

TEST(AmqpFrame, HeartbeatEncodesAsTheSpecSays) {
  EXPECT_EQ(to_hex(encode_heartbeat()), "08"
                                        "0000"
                                        "00000000"
                                        "ce");  // type 8, channel 0, size 0, frame-end
}

TEST(AmqpMethods, QueueDeclareFromPikaKeepsEveryFieldType) {
  Method m = method_of(kQueueDeclareFromPika);
  EXPECT_EQ(m.name(), "queue.declare");
  EXPECT_EQ(m.text("queue"), "q1");
  EXPECT_TRUE(m.flag("durable"));
  EXPECT_FALSE(m.flag("exclusive"));
  const FieldTable& args = m.table("arguments");
  EXPECT_EQ(*find(args, "x-max-length"), FieldValue(std::int32_t{10}));
  EXPECT_EQ(*find(args, "flag"), FieldValue(true));
  EXPECT_EQ(*find(args, "name"), FieldValue("abc"));
  EXPECT_EQ(*find(args, "nested"),
            FieldValue(FieldTable{{"a", FieldValue(FieldArray{FieldValue(std::int32_t{1}), FieldValue("b")})}}));
  EXPECT_EQ(*find(args, "bytes"), FieldValue(ByteArray{{0, 1}}));
  EXPECT_EQ(*find(args, "dec"), FieldValue(Decimal{1, 15}));
  EXPECT_EQ(*find(args, "ts"), FieldValue(Timestamp{1577836800}));
  EXPECT_EQ(*find(args, "none"), FieldValue(Void{}));
  EXPECT_EQ(*find(args, "big"), FieldValue(std::int64_t{1} << 40));
}

TEST(AmqpMethods, EncodingADecodedMethodGivesTheClientsBytes) {
  for (auto h : {kQueueDeclareFromPika, kPublishFromPika, kStartOkFromPika, kNackFromPika}) {
    Bytes frame = hex(h);
    Method m = method_of(h);
    EXPECT_EQ(encode_frame(FrameType::method, frame[2], encode_method(m)), frame) << m.name();
  }
}

TEST(AmqpMethods, StartOkFromPika) {
  Method m = method_of(kStartOkFromPika);
  EXPECT_EQ(m.id(), method::kConnectionStartOk);
  EXPECT_EQ(m.text("mechanism"), "PLAIN");
  EXPECT_EQ(m.text("response"), std::string("\0guest\0guest", 12));
  const auto* caps = find(m.table("client_properties"), "capabilities");
  ASSERT_NE(caps, nullptr);
  EXPECT_EQ(*find(*caps->get_if<FieldTable>(), "publisher_confirms"), FieldValue(true));
}

TEST(AmqpMethods, ConsecutiveBitsShareAnOctetLowestBitFirst) {
  Method nack = method_of(kNackFromPika);
  EXPECT_EQ(nack.number("delivery_tag"), 7u);
  EXPECT_TRUE(nack.flag("multiple"));
  EXPECT_FALSE(nack.flag("requeue"));
  Method declare = Method::of(method::kExchangeDeclare);
  declare.set("exchange", std::string("x")).set("passive", true).set("internal", true).set("no_wait", true);
  const Bytes bytes = encode_method(declare);
  // class, method, ticket, "x", "" (type), then one octet: passive bit 0, internal bit 3, no-wait bit 4.
  EXPECT_EQ(bytes.at(4 + 2 + 2 + 1), 0b11001);
  auto back = decode_method(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, declare);
}

TEST(AmqpMethods, EveryMethodOfTheTableRoundTripsAndIdsAreUnique) {
  std::set<std::pair<int, int>> ids;
  for (const MethodSpec& spec : method_table()) {
    EXPECT_TRUE(ids.insert({spec.id.class_id, spec.id.method_id}).second) << spec.name;
    Method m(spec);
    auto back = decode_method(encode_method(m));
    ASSERT_TRUE(back.ok()) << spec.name << ": " << back.error().msg;
    EXPECT_EQ(*back, m) << spec.name;
  }
  EXPECT_EQ(ids.size(), 66u);
}

TEST(AmqpMethods, MalformedMethodsGiveTheirReplyCodes) {
  Bytes publish = hex(kPublishFromPika);
  const Bytes payload(publish.begin() + 7, publish.end() - 1);
  auto truncated = decode_method(ByteView(payload).first(payload.size() - 1));
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.error().code, 502);
  EXPECT_NE(truncated.error().msg.find("basic.publish"), std::string::npos);
  Bytes trailing = payload;
  trailing.push_back(0);
  EXPECT_EQ(decode_method(trailing).error().code, 502);
  EXPECT_EQ(decode_method(Bytes{0, 60, 0, 99}).error().code, 540);
  EXPECT_EQ(decode_method(Bytes{0, 60}).error().code, 502);
}

TEST(AmqpFieldTable, UnknownTypeAndTruncatedValuesAreSyntaxErrors) {
  // queue.declare whose arguments hold {"k": type 'Z'}
  Bytes unknown = {0, 50, 0, 10, 0, 0, 1, 'q', 0, 0, 0, 0, 3, 1, 'k', 'Z'};
  auto bad = decode_method(unknown);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 502);
  EXPECT_NE(bad.error().msg.find("'Z'"), std::string::npos) << bad.error().msg;
  Bytes short_long = {0, 50, 0, 10, 0, 0, 1, 'q', 0, 0, 0, 0, 4, 1, 'k', 'I', 0};
  EXPECT_EQ(decode_method(short_long).error().code, 502);
}

TEST(AmqpFieldTable, NestingDeeperThanTheBoundIsRefused) {
  // arrays inside arrays, 100 deep, as one table entry
  Bytes inner;
  for (int i = 0; i < 100; ++i) {
    Bytes outer = {'A'};
    append_u32_be(outer, static_cast<std::uint32_t>(inner.size()));
    outer.insert(outer.end(), inner.begin(), inner.end());
    inner = std::move(outer);
  }
  Bytes table = {1, 'k'};
  table.insert(table.end(), inner.begin(), inner.end());
  Bytes declare = {0, 50, 0, 10, 0, 0, 1, 'q', 0};
  append_u32_be(declare, static_cast<std::uint32_t>(table.size()));
  declare.insert(declare.end(), table.begin(), table.end());
  auto bad = decode_method(declare);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 502);
  EXPECT_NE(bad.error().msg.find("nested deeper"), std::string::npos) << bad.error().msg;
}

// A queue.declare whose arguments are one array of `elements` voids (each one byte, 'V').
Bytes declare_with_voids(std::size_t elements) {
  Bytes array = {'A'};
  append_u32_be(array, static_cast<std::uint32_t>(elements));
  array.insert(array.end(), elements, 'V');
  Bytes table = {1, 'k'};
  table.insert(table.end(), array.begin(), array.end());
  Bytes declare = {0, 50, 0, 10, 0, 0, 1, 'q', 0};
  append_u32_be(declare, static_cast<std::uint32_t>(table.size()));
  declare.insert(declare.end(), table.begin(), table.end());
  return declare;
}

// A table holds no more items than a FireMQ header may (kMaxItems): each costs tens of bytes once decoded, so a
// frame of one-byte voids would otherwise become tens of times its size.
TEST(AmqpFieldTable, MoreThanTheItemBoundIsA502) {
  EXPECT_TRUE(decode_method(declare_with_voids(kMaxTableItems - 1)).ok());  // and the entry holding them
  auto bad = decode_method(declare_with_voids(kMaxTableItems));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 502);
  EXPECT_NE(bad.error().msg.find("field table has more than 65536 items"), std::string::npos) << bad.error().msg;
}

TEST(AmqpFieldTable, EveryTypeRoundTrips) {
  FieldTable all = {{"V", Void{}},
                    {"t", true},
                    {"b", std::int8_t{-1}},
                    {"B", std::uint8_t{255}},
                    {"s", std::int16_t{-2}},
                    {"u", std::uint16_t{65535}},
                    {"I", std::int32_t{-3}},
                    {"i", std::uint32_t{4000000000u}},
                    {"l", std::int64_t{-4}},
                    {"f", 1.5f},
                    {"d", 2.25},
                    {"D", Decimal{2, -314}},
                    {"S", "text"},
                    {"x", ByteArray{{0xff}}},
                    {"A", FieldArray{1, "a"}},
                    {"T", Timestamp{42}},
                    {"F", FieldTable{{"in", Void{}}}}};
  for (const FieldEntry& e : all) EXPECT_EQ(e.name[0], e.value.type_letter()) << e.name;
  Bytes out;
  WireWriter w(out);
  write_table(w, all);
  WireReader r(out);
  auto back = read_table(r);
  ASSERT_TRUE(back.ok()) << back.error().msg;
  EXPECT_EQ(*back, all);
  EXPECT_TRUE(r.at_end());
}

TEST(AmqpContent, HeaderFromPikaHasItsProperties) {
  auto frames = decode_all(hex(kHeaderFromPika));
  ASSERT_EQ(frames.size(), 1u);
  auto h = decode_content_header(frames[0].payload);
  ASSERT_TRUE(h.ok()) << h.error().msg;
  EXPECT_EQ(h->class_id, kBasicClass);
  EXPECT_EQ(h->body_size, 5u);
  EXPECT_EQ(*h->get("content_type"), Arg(std::string("text/plain")));
  EXPECT_EQ(*h->get("delivery_mode"), Arg(std::uint64_t{2}));
  EXPECT_EQ(*h->get("priority"), Arg(std::uint64_t{3}));
  EXPECT_EQ(*h->get("expiration"), Arg(std::string("60000")));
  EXPECT_EQ(*h->get("timestamp"), Arg(std::uint64_t{1600000000}));
  EXPECT_EQ(*h->get("message_id"), Arg(std::string("m1")));
  const auto& headers = std::get<FieldTable>(*h->get("headers"));
  EXPECT_EQ(*find(headers, "n"), FieldValue(std::int32_t{-5}));
  EXPECT_EQ(h->get("app_id"), nullptr);
  EXPECT_EQ(encode_content_header(*h), frames[0].payload);
}

TEST(AmqpContent, FlagsBeyondTheFourteenPropertiesAreSyntaxErrors) {
  Bytes h = {0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  EXPECT_EQ(decode_content_header(h).error().code, 502);
  Bytes continued = {0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x80, 0};
  EXPECT_EQ(decode_content_header(continued).error().code, 502);
  Bytes truncated = {0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0};  // content_type flagged, absent
  EXPECT_EQ(decode_content_header(truncated).error().code, 502);
}

TEST(AmqpContent, BodyIsCutToFrameMax) {
  const Bytes body(10000, 'x');
  Method deliver = Method::of(method::kBasicDeliver);
  ContentHeader header;
  Bytes out = encode_content(3, deliver, header, body, kFrameMinSize);
  auto frames = decode_all(out);
  ASSERT_EQ(frames.size(), 5u);  // method, header, 4088 + 4088 + 1824
  EXPECT_EQ(frames[2].payload.size(), kFrameMinSize - kFrameOverhead);
  EXPECT_EQ(frames[4].payload.size(), 10000 - 2 * (kFrameMinSize - kFrameOverhead));
  auto h = decode_content_header(frames[1].payload);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->body_size, 10000u);
  EXPECT_EQ(decode_all(encode_content(3, deliver, header, {}, kFrameMinSize)).size(), 2u);
}

// --- The hot path's shortcuts (message_methods.h), each against the generic codec ----------------------------

Bytes payload_of(std::string_view frame_hex) { return decode_all(hex(frame_hex)).at(0).payload; }

TEST(AmqpFrame, AWholeFrameInTheChunkIsReadInPlace) {
  Bytes stream = hex(kPublishFromPika);
  const Bytes body = hex(kBodyFromPika);
  stream.insert(stream.end(), body.begin(), body.end() - 3);  // the body frame cut short
  FrameDecoder decoder(false);
  auto step = decoder.feed(stream);
  ASSERT_EQ(step.state, FrameDecoder::State::frame);
  EXPECT_EQ(step.consumed, hex(kPublishFromPika).size());
  // The payload lies where it was fed: no copy.
  EXPECT_EQ(decoder.frame().payload.data(), stream.data() + kFrameHeaderSize);
  EXPECT_EQ(decoder.take_frame().payload, payload_of(kPublishFromPika));
  // The cut frame is gathered, then whole on its last bytes.
  EXPECT_EQ(decoder.feed(ByteView(stream).subspan(step.consumed)).state, FrameDecoder::State::need_more);
  auto last = decoder.feed(ByteView(body).last(3));
  ASSERT_EQ(last.state, FrameDecoder::State::frame);
  EXPECT_EQ(decoder.take_frame().payload, Bytes({'h', 'e', 'l', 'l', 'o'}));
}

TEST(AmqpMessageMethods, PublishIsReadAsTheGenericDecoderReadsIt) {
  const Bytes payload = payload_of(kPublishFromPika);
  EXPECT_EQ(method_id_of(payload), method::kBasicPublish);
  auto fields = read_basic_publish(payload);
  ASSERT_TRUE(fields.has_value());
  const Method generic = *decode_method(payload);
  EXPECT_EQ(fields->exchange, generic.text("exchange"));
  EXPECT_EQ(fields->routing_key, generic.text("routing_key"));
  EXPECT_EQ(fields->mandatory, generic.flag("mandatory"));
  EXPECT_EQ(fields->immediate, generic.flag("immediate"));
  const Bytes immediate = encode_method(Method::of(method::kBasicPublish).set("immediate", true));
  EXPECT_TRUE(read_basic_publish(immediate)->immediate);
  EXPECT_FALSE(read_basic_publish(immediate)->mandatory);
}

TEST(AmqpMessageMethods, AMalformedPublishOrSettlementIsLeftToTheGenericDecoder) {
  Bytes trailing = payload_of(kPublishFromPika);
  trailing.push_back(0);
  EXPECT_FALSE(read_basic_publish(trailing).has_value());
  EXPECT_FALSE(decode_method(trailing).ok());
  const Bytes publish = payload_of(kPublishFromPika);
  const Bytes truncated(publish.begin(), publish.end() - 1);
  EXPECT_FALSE(read_basic_publish(truncated).has_value());
  EXPECT_FALSE(read_basic_publish(payload_of(kNackFromPika)).has_value());  // another method
  EXPECT_FALSE(read_basic_settle(publish).has_value());
  Bytes nack = payload_of(kNackFromPika);
  nack.pop_back();
  EXPECT_FALSE(read_basic_settle(nack).has_value());
  EXPECT_EQ(method_id_of(Bytes{0, 60}), MethodId{});
}

TEST(AmqpMessageMethods, SettlementsAreReadAsTheGenericDecoderReadsThem) {
  auto nack = read_basic_settle(payload_of(kNackFromPika));
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->method, method::kBasicNack);
  EXPECT_EQ(nack->delivery_tag, 7u);
  EXPECT_TRUE(nack->multiple);
  EXPECT_FALSE(nack->requeue);
  for (MethodId id : {method::kBasicAck, method::kBasicNack, method::kBasicReject}) {
    for (int bits = 0; bits < 4; ++bits) {
      Method m = Method::of(id).set("delivery_tag", std::uint64_t{1} << 40);
      for (const auto& field : m.spec().fields) {
        if (field.name == "multiple") m.set("multiple", (bits & 1) != 0);
        if (field.name == "requeue") m.set("requeue", (bits & 2) != 0);
      }
      auto fields = read_basic_settle(encode_method(m));
      ASSERT_TRUE(fields.has_value()) << m.name();
      EXPECT_EQ(fields->method, id);
      EXPECT_EQ(fields->delivery_tag, m.number("delivery_tag"));
      EXPECT_EQ(fields->multiple, m.flag("multiple")) << m.name() << " " << bits;
      EXPECT_EQ(fields->requeue, m.flag("requeue")) << m.name() << " " << bits;
    }
  }
}

TEST(AmqpMessageMethods, DeliverAndConfirmAreTheGenericEncodersBytes) {
  for (bool redelivered : {false, true}) {
    Bytes out = {0xAA};  // appended after what is there
    append_basic_deliver(out, 9, "amq.ctag-1", 123456789, redelivered, "ex", "key");
    Method deliver = Method::of(method::kBasicDeliver);
    deliver.set("consumer_tag", std::string("amq.ctag-1")).set("delivery_tag", std::uint64_t{123456789});
    deliver.set("redelivered", redelivered).set("exchange", std::string("ex")).set("routing_key", std::string("key"));
    Bytes expected = {0xAA};
    const Bytes frame = encode_frame(FrameType::method, 9, encode_method(deliver));
    expected.insert(expected.end(), frame.begin(), frame.end());
    EXPECT_EQ(out, expected);
  }
  Bytes ack;
  append_basic_ack(ack, 2, 77, true);
  EXPECT_EQ(ack, encode_frame(
                     FrameType::method, 2,
                     encode_method(
                         Method::of(method::kBasicAck).set("delivery_tag", std::uint64_t{77}).set("multiple", true))));
}

TEST(AmqpMessageMethods, ContentAppendedInPlaceIsEncodeContentsAfterItsMethod) {
  const Bytes body(10000, 'y');
  ContentHeader header;
  header.set(property::kDeliveryMode, std::uint64_t{2}).set(property::kMessageId, std::string("m1"));
  const Method deliver = Method::of(method::kBasicDeliver);
  const Bytes whole = encode_content(4, deliver, header, body, kFrameMinSize);
  Bytes appended = encode_frame(FrameType::method, 4, encode_method(deliver));
  append_content(appended, 4, header, body, kFrameMinSize);
  EXPECT_EQ(appended, whole);
  EXPECT_EQ(*header.get(property::kMessageId), *header.get("message_id"));
}

}  // namespace
}  // namespace firemq::amqp
