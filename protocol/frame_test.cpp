#include "protocol/frame.h"

#include <gtest/gtest.h>

#include <vector>

#include "protocol/reply_codes.h"

namespace firemq {
namespace {

Bytes concat(std::initializer_list<ByteView> parts) {
  Bytes out;
  for (ByteView p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// A frame whose len is `len`: op 0x20, hlen 0, the rest payload.
Bytes frame_with_len(std::size_t len) {
  Bytes payload(len - kFixedSize, 0xab);
  return frame_stream(0x20, {}, payload);
}

struct Decoded {
  std::vector<RawFrame> frames;
  Status error;
};

// Feeds `bytes` in chunks of `chunk` bytes, collecting frames until the end or an error.
Decoded decode_all(FrameDecoder& decoder, ByteView bytes, std::size_t chunk) {
  Decoded out;
  for (std::size_t at = 0; at < bytes.size(); at += chunk) {
    ByteView piece = bytes.subspan(at, std::min(chunk, bytes.size() - at));
    while (!piece.empty()) {
      auto step = decoder.feed(piece);
      piece = piece.subspan(step.consumed);
      if (step.state == FrameDecoder::State::frame) out.frames.push_back(decoder.take_frame());
      if (step.state == FrameDecoder::State::error) {
        out.error = decoder.error();
        return out;
      }
    }
  }
  return out;
}

Bytes three_frames() {
  const Bytes header = {0x81, 0xa3, 's', 'e', 'q', 0x01};
  const Bytes body = {0xff, 0x00, 0xfe};
  return concat({as_bytes(kPreamble), frame_stream(0x20, header, body), frame_stream(0x03, {}, {}),
                 frame_stream(0x05, header, {})});
}

TEST(FrameDecoder, OneByteFeedingYieldsTheSameFramesAsOneChunk) {
  const Bytes stream = three_frames();
  FrameDecoder whole(StreamSide::server);
  FrameDecoder bytewise(StreamSide::server);
  Decoded a = decode_all(whole, stream, stream.size());
  Decoded b = decode_all(bytewise, stream, 1);
  ASSERT_FALSE(a.error);
  ASSERT_FALSE(b.error);
  ASSERT_EQ(a.frames.size(), 3u);
  ASSERT_EQ(b.frames.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a.frames[i].op(), b.frames[i].op());
    EXPECT_EQ(to_hex(a.frames[i].header()), to_hex(b.frames[i].header()));
    EXPECT_EQ(to_hex(a.frames[i].payload()), to_hex(b.frames[i].payload()));
  }
  EXPECT_EQ(a.frames[0].op(), 0x20);
  EXPECT_EQ(to_hex(a.frames[0].header()), "81a373657101");
  EXPECT_EQ(to_hex(a.frames[0].payload()), "ff00fe");
  EXPECT_TRUE(a.frames[1].header().empty());
  EXPECT_FALSE(whole.finish());
}

TEST(FrameDecoder, EveryChunkSizeYieldsTheSameFrames) {
  const Bytes stream = three_frames();
  for (std::size_t chunk = 1; chunk <= stream.size(); ++chunk) {
    FrameDecoder decoder(StreamSide::server);
    Decoded d = decode_all(decoder, stream, chunk);
    ASSERT_FALSE(d.error) << "chunk " << chunk;
    ASSERT_EQ(d.frames.size(), 3u) << "chunk " << chunk;
    EXPECT_EQ(to_hex(d.frames[2].header()), "81a373657101");
  }
}

TEST(FrameDecoder, StopsAtEachFrameBoundarySoItBuffersOneFrameAtMost) {
  const Bytes stream = three_frames();
  FrameDecoder decoder(StreamSide::server);
  auto step = decoder.feed(stream);
  EXPECT_EQ(step.state, FrameDecoder::State::frame);
  EXPECT_EQ(step.consumed, kPreamble.size() + 4 + 5 + 6 + 3);
}

TEST(FrameDecoder, ClientSideExpectsNoPreamble) {
  FrameDecoder decoder(StreamSide::client);
  const Bytes frame = frame_stream(0x04, {}, {});
  Decoded d = decode_all(decoder, frame, 1);
  ASSERT_FALSE(d.error);
  ASSERT_EQ(d.frames.size(), 1u);
  EXPECT_EQ(d.frames[0].op(), 0x04);
}

TEST(FrameDecoder, WrongPreambleFailsAtItsFirstWrongByte) {
  FrameDecoder decoder(StreamSide::server);
  auto step = decoder.feed(as_bytes("A"));
  ASSERT_EQ(step.state, FrameDecoder::State::error);
  EXPECT_EQ(decoder.error().code, 501);
  EXPECT_TRUE(decoder.error().fatal);
  EXPECT_NE(decoder.error().msg.find("FMQ1"), std::string::npos);
}

TEST(FrameDecoder, FailedDecoderStaysFailed) {
  FrameDecoder decoder(StreamSide::server);
  (void)decoder.feed(as_bytes("AMQP"));
  auto step = decoder.feed(three_frames());
  EXPECT_EQ(step.state, FrameDecoder::State::error);
  EXPECT_EQ(step.consumed, 0u);
}

TEST(FrameDecoder, LenBelowFiveIsFatalFrameError) {
  for (std::uint8_t len : {0, 1, 4}) {
    FrameDecoder decoder(StreamSide::client);
    const Bytes bytes = {0, 0, 0, len, 0x03, 0, 0, 0, 0};
    Decoded d = decode_all(decoder, bytes, 1);
    ASSERT_TRUE(d.error) << int(len);
    EXPECT_EQ(d.error->code, 501);
    EXPECT_TRUE(d.error->fatal);
  }
}

TEST(FrameDecoder, LenOfFiveIsTheSmallestFrame) {
  FrameDecoder decoder(StreamSide::client);
  Decoded d = decode_all(decoder, Bytes{0, 0, 0, 5, 0x03, 0, 0, 0, 0}, 1);
  ASSERT_FALSE(d.error);
  ASSERT_EQ(d.frames.size(), 1u);
  EXPECT_EQ(d.frames[0].size(), kMinFrameSize);
}

TEST(FrameDecoder, HlenBeyondTheFrameIsFatalFrameError) {
  FrameDecoder decoder(StreamSide::client);
  // len 7: op, hlen = 3, but only 2 bytes follow.
  Decoded d = decode_all(decoder, Bytes{0, 0, 0, 7, 0x20, 0, 0, 0, 3, 0x80, 0x00}, 1);
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code, 501);
  EXPECT_NE(d.error->msg.find("hlen 3"), std::string::npos);
}

TEST(FrameDecoder, HlenFillingTheWholeFrameIsAccepted) {
  FrameDecoder decoder(StreamSide::client);
  Decoded d = decode_all(decoder, Bytes{0, 0, 0, 6, 0x20, 0, 0, 0, 1, 0x80}, 1);
  ASSERT_FALSE(d.error);
  EXPECT_TRUE(d.frames[0].payload().empty());
}

TEST(FrameDecoder, FrameOfExactlyThePreWelcomeLimitIsAccepted) {
  FrameDecoder decoder(StreamSide::client);
  const Bytes frame = frame_with_len(kMaxFrameBeforeWelcome - kLenSize);
  ASSERT_EQ(frame.size(), kMaxFrameBeforeWelcome);
  Decoded d = decode_all(decoder, frame, 4096);
  ASSERT_FALSE(d.error) << d.error->msg;
  ASSERT_EQ(d.frames.size(), 1u);
}

TEST(FrameDecoder, FrameOneByteOverThePreWelcomeLimitIsRefusedFromLenAlone) {
  FrameDecoder decoder(StreamSide::client);
  const Bytes len_only = {0x00, 0x00, 0xff, 0xfd};  // len 65533: a frame of 65537 bytes
  auto step = decoder.feed(len_only);
  ASSERT_EQ(step.state, FrameDecoder::State::error);
  EXPECT_EQ(decoder.error().code, 501);
  EXPECT_TRUE(decoder.error().fatal);
  EXPECT_NE(decoder.error().msg.find("65537"), std::string::npos);
}

TEST(FrameDecoder, HugeLenIsRefusedWithoutAllocating) {
  FrameDecoder decoder(StreamSide::client, kDefaultMaxFrame);
  auto step = decoder.feed(Bytes{0xff, 0xff, 0xff, 0xff});
  ASSERT_EQ(step.state, FrameDecoder::State::error);
  EXPECT_EQ(decoder.error().code, 501);
}

TEST(FrameDecoder, RaisedLimitAcceptsMaxFrameAndRefusesOneMore) {
  FrameDecoder at_limit(StreamSide::client);
  at_limit.set_max_frame(kDefaultMaxFrame);
  Decoded d = decode_all(at_limit, frame_with_len(kDefaultMaxFrame - kLenSize), 1 << 20);
  ASSERT_FALSE(d.error);
  ASSERT_EQ(d.frames.size(), 1u);
  EXPECT_EQ(d.frames[0].size(), kDefaultMaxFrame);

  FrameDecoder over(StreamSide::client);
  over.set_max_frame(kDefaultMaxFrame);
  Bytes len_only;
  append_u32_be(len_only, static_cast<std::uint32_t>(kDefaultMaxFrame - kLenSize + 1));
  EXPECT_EQ(over.feed(len_only).state, FrameDecoder::State::error);
}

TEST(FrameDecoder, StreamEndingInsideAFrameIsATruncatedFrame) {
  const Bytes frame = frame_stream(0x20, {}, Bytes{1, 2, 3});
  for (std::size_t cut = 1; cut < frame.size(); ++cut) {
    FrameDecoder decoder(StreamSide::client);
    Decoded d = decode_all(decoder, ByteView(frame).first(cut), 1);
    ASSERT_FALSE(d.error);
    Status end = decoder.finish();
    ASSERT_TRUE(end) << "cut at " << cut;
    EXPECT_EQ(end->code, 501);
  }
}

TEST(FrameDecoder, StreamEndingBetweenFramesIsClean) {
  FrameDecoder decoder(StreamSide::server);
  Decoded d = decode_all(decoder, three_frames(), 7);
  EXPECT_EQ(d.frames.size(), 3u);
  EXPECT_FALSE(decoder.finish());
}

TEST(MessageFraming, DecodesOneMessageAsOneFrame) {
  const Bytes message = frame_message(0x33, Bytes{0x80}, Bytes{0xde, 0xad});
  ASSERT_EQ(to_hex(message), "330000000180dead");
  auto frame = decode_message_frame(message, kMaxFrameBeforeWelcome);
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame->op(), 0x33);
  EXPECT_EQ(to_hex(frame->payload()), "dead");
  EXPECT_EQ(frame->size(), message.size() + kLenSize);
}

TEST(MessageFraming, MessageShorterThanFiveBytesIsFrameError) {
  auto frame = decode_message_frame(Bytes{0x03, 0, 0, 0}, kMaxFrameBeforeWelcome);
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.error().code, 501);
}

TEST(MessageFraming, LimitCountsTheLenTheMessageWouldHave) {
  Bytes at_limit = frame_message(0x20, {}, Bytes(kMaxFrameBeforeWelcome - kMinFrameSize, 0));
  EXPECT_TRUE(decode_message_frame(at_limit, kMaxFrameBeforeWelcome).ok());
  at_limit.push_back(0);
  auto over = decode_message_frame(at_limit, kMaxFrameBeforeWelcome);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, 501);
}

TEST(FrameEncoding, StreamFrameHasLenOpHlenHeaderPayload) {
  EXPECT_EQ(to_hex(frame_stream(0x05, Bytes{0x80}, {})), "00000006050000000180");
  EXPECT_EQ(to_hex(frame_stream(0x03, {}, {})), "000000050300000000");
}

}  // namespace
}  // namespace firemq
