// The WebSocket framing of the harness's client (RFC 6455, 5) and the translation of the TCP framing's bytes
// into WebSocket messages, without sockets.
#include "harness/client/websocket_framing.h"

#include <gtest/gtest.h>

#include "harness/client/stream_to_messages.h"

namespace firemq::conform {
namespace {

constexpr std::array<std::uint8_t, 4> kMask = {0x12, 0x34, 0x56, 0x78};

Bytes pattern(std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i * 7 + 3);
  return b;
}

// Parses `bytes` completely into frames, a chunk of `chunk` bytes at a time.
std::vector<WsFrame> parse_all(ByteView bytes, std::size_t chunk = 1 << 20, std::size_t max = 1 << 20) {
  WsFrameParser parser(max);
  std::vector<WsFrame> frames;
  while (!bytes.empty()) {
    const ByteView piece = bytes.first(std::min(chunk, bytes.size()));
    const auto step = parser.feed(piece);
    bytes = bytes.subspan(step.consumed);
    EXPECT_NE(step.state, WsFrameParser::State::error) << parser.error();
    if (step.state == WsFrameParser::State::error) break;
    if (step.state == WsFrameParser::State::frame) frames.push_back(parser.take_frame());
  }
  return frames;
}

class LengthEncoding : public ::testing::TestWithParam<std::size_t> {};

TEST_P(LengthEncoding, MaskedFrameUsesTheShortestLengthAndRoundTrips) {
  const std::size_t n = GetParam();
  const Bytes payload = pattern(n);
  const Bytes frame = encode_ws_frame(true, 0x2, payload, kMask);
  EXPECT_EQ(frame[0], 0x82);  // FIN, binary
  EXPECT_EQ(frame[1] & 0x80, 0x80) << "client frames are masked";
  const std::size_t head = n <= 125 ? 2 : n <= 0xffff ? 4 : 10;
  EXPECT_EQ(frame[1] & 0x7f, n <= 125 ? n : n <= 0xffff ? 126 : 127);
  ASSERT_EQ(frame.size(), head + 4 + n);
  EXPECT_TRUE(std::equal(kMask.begin(), kMask.end(), frame.begin() + static_cast<std::ptrdiff_t>(head)));
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 16); ++i) {
    EXPECT_EQ(frame[head + 4 + i], payload[i] ^ kMask[i % 4]) << "byte " << i << " is masked";
  }
  const auto frames = parse_all(frame);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0].fin);
  EXPECT_TRUE(frames[0].masked);
  EXPECT_EQ(frames[0].payload, payload);
}

INSTANTIATE_TEST_SUITE_P(Lengths, LengthEncoding, ::testing::Values(0, 1, 125, 126, 65535, 65536, 70000));

TEST(WsFrameParser, ReadsFramesOneByteAtATime) {
  Bytes bytes = encode_ws_frame(true, 0x2, pattern(300), std::nullopt);
  const Bytes second = encode_ws_frame(true, 0x9, pattern(5), std::nullopt);
  bytes.insert(bytes.end(), second.begin(), second.end());
  const auto frames = parse_all(bytes, 1);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].payload, pattern(300));
  EXPECT_FALSE(frames[0].masked);
  EXPECT_EQ(frames[1].opcode, 0x9);
}

TEST(WsFrameParser, RefusesAFrameOverTheLimitBeforeReadingIt) {
  WsFrameParser parser(1000);
  const Bytes frame = encode_ws_frame(true, 0x2, pattern(1001), std::nullopt);
  const auto step = parser.feed(ByteView(frame).first(4));  // the header alone
  EXPECT_EQ(step.state, WsFrameParser::State::error);
  EXPECT_NE(parser.error().find("1001"), std::string::npos);
}

TEST(WsFrameParser, RefusesALongOrFragmentedControlFrame) {
  WsFrameParser long_ping(1 << 20);
  EXPECT_EQ(long_ping.feed(encode_ws_frame(true, 0x9, pattern(126), std::nullopt)).state, WsFrameParser::State::error);
  WsFrameParser fragmented_close(1 << 20);
  EXPECT_EQ(fragmented_close.feed(encode_ws_frame(false, 0x8, {}, std::nullopt)).state, WsFrameParser::State::error);
}

TEST(WsMessageAssembler, PutsFragmentsTogetherWithAPingBetweenThem) {
  WsMessageAssembler assembler(1 << 20);
  EXPECT_TRUE(std::holds_alternative<WsMessageAssembler::Incomplete>(assembler.add({false, 0x2, false, {1, 2}})));
  auto ping = assembler.add({true, 0x9, false, {9}});
  ASSERT_TRUE(std::holds_alternative<WsMessageAssembler::Control>(ping));
  EXPECT_TRUE(std::holds_alternative<WsMessageAssembler::Incomplete>(assembler.add({false, 0x0, false, {3}})));
  auto done = assembler.add({true, 0x0, false, {4, 5}});
  ASSERT_TRUE(std::holds_alternative<WsMessageAssembler::Message>(done));
  EXPECT_EQ(std::get<WsMessageAssembler::Message>(done).opcode, WsOpcode::binary);
  EXPECT_EQ(std::get<WsMessageAssembler::Message>(done).data, (Bytes{1, 2, 3, 4, 5}));
}

TEST(WsMessageAssembler, RefusesAContinuationWithoutAMessageAndANewMessageInsideOne) {
  WsMessageAssembler assembler(1 << 20);
  EXPECT_TRUE(std::holds_alternative<WsMessageAssembler::Error>(assembler.add({true, 0x0, false, {1}})));
  EXPECT_TRUE(std::holds_alternative<WsMessageAssembler::Incomplete>(assembler.add({false, 0x1, false, {1}})));
  EXPECT_TRUE(std::holds_alternative<WsMessageAssembler::Error>(assembler.add({true, 0x2, false, {1}})));
}

TEST(WsClose, CodeAndReasonRoundTrip) {
  const WsClose close = parse_close_payload(close_payload(1008, "policy"));
  EXPECT_EQ(close.code, 1008);
  EXPECT_EQ(close.reason, "policy");
  EXPECT_FALSE(parse_close_payload({}).code);
}

TEST(Handshake, AcceptValueIsTheRfcExample) {
  // RFC 6455, 1.3.
  EXPECT_EQ(websocket_accept_for("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(StreamToMessages, DropsThePreambleAndSendsEachFrameWhenComplete) {
  StreamToMessages t;
  // FMQ1, then a ping (len 5) and the start of another.
  auto first = t.feed(*from_hex("464d5131"
                                "000000050300000000"
                                "0000"));
  ASSERT_TRUE(first);
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ(to_hex((*first)[0]), "0300000000");
  EXPECT_EQ(t.pending(), 2u);
  auto second = t.feed(*from_hex("00060300000001800000000503000000"));
  ASSERT_TRUE(second);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ(to_hex((*second)[0]), "030000000180");
  EXPECT_EQ(t.pending(), 8u);
}

TEST(StreamToMessages, RefusesWhatAWebSocketMessageCannotSay) {
  StreamToMessages short_len;
  EXPECT_FALSE(short_len.feed(*from_hex("0000000403000000")));
  StreamToMessages amqp;
  EXPECT_FALSE(amqp.feed(*from_hex("414d515000000901")));
}

}  // namespace
}  // namespace firemq::conform
