// Cross-check (a): the C++ decoder decodes every vector to its listed header and payload, rejects every
// invalid vector with its listed code and fatality, and parses every URL vector as listed.
// The vectors come from generate.py, an independent Python implementation; see README.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/msgpack_codec.h"
#include "protocol/typed_json.h"
#include "protocol/url.h"

namespace firemq {
namespace {

using Json = nlohmann::json;

// The "vectors" array of a vector file (returned by value: a range-for over a member of a temporary would
// read freed memory).
Json load(const std::string& name) {
  std::ifstream in(std::string(FIREMQ_VECTORS_DIR) + "/" + name);
  EXPECT_TRUE(in.good()) << "cannot open vectors/" << name;
  Json vectors = Json::parse(in).at("vectors");
  EXPECT_FALSE(vectors.empty()) << name;
  return vectors;
}

// Maps compare without regard to key order: a JSON object does not keep it.
Value canonical(const Value& v) {
  if (const auto* items = v.get_if<Array>()) {
    Array out;
    for (const Value& item : *items) out.push_back(canonical(item));
    return Value(std::move(out));
  }
  if (const auto* map = v.get_if<Map>()) {
    Map out;
    for (const MapEntry& e : *map) out.push_back({canonical(e.key), canonical(e.value)});
    std::stable_sort(out.begin(), out.end(), [](const MapEntry& a, const MapEntry& b) {
      return typed_json_from_value(a.key).dump() < typed_json_from_value(b.key).dump();
    });
    return Value(std::move(out));
  }
  return v;
}

Value expected_header(const Json& vector) {
  auto header = value_from_typed_json(vector.at("header"));
  EXPECT_TRUE(header.ok()) << vector.at("name") << ": " << (header.ok() ? "" : header.error());
  return header.ok() ? *header : Value();
}

RawFrame decode_one_frame(const Json& vector) {
  const Bytes bytes = *from_hex(vector.at("frame").get<std::string>());
  FrameDecoder decoder(StreamSide::client, kDefaultMaxFrame);
  auto step = decoder.feed(bytes);
  EXPECT_EQ(step.state, FrameDecoder::State::frame) << vector.at("name");
  EXPECT_EQ(step.consumed, bytes.size()) << vector.at("name");
  return step.state == FrameDecoder::State::frame ? decoder.take_frame() : RawFrame(Bytes(5, 0));
}

// Compares each field of a decoded struct with the vector's header, independently of the codec: a field the
// header omits (or sets to nil or its zero value) must hold its zero value.
class FieldComparer {
 public:
  FieldComparer(const Map& expected, std::string prefix, std::vector<std::string>& mismatches)
      : expected_(expected), prefix_(std::move(prefix)), mismatches_(mismatches) {}

  void operator()(std::string_view name, const std::uint64_t& v) { compare(name, v ? Value(v) : Value()); }
  void operator()(std::string_view name, const bool& v) { compare(name, v ? Value(true) : Value()); }
  void operator()(std::string_view name, const std::string& v) { compare(name, v.empty() ? Value() : Value(v)); }
  void operator()(std::string_view name, const Map& v) { compare(name, v.empty() ? Value() : Value(v)); }
  void operator()(std::string_view name, const Props& v) { (*this)(name, v.entries); }
  void operator()(std::string_view name, const StrList& v) {
    Array items(v.begin(), v.end());
    compare(name, items.empty() ? Value() : Value(items));
  }
  template <class T>
    requires requires(const T& t) { T::fields(t, [](std::string_view, const auto&) {}); }
  void operator()(std::string_view name, const T& v) {
    const Value* nested = find(expected_, name);
    const Map empty;
    const Map& nested_map = nested && nested->is<Map>() ? *nested->get_if<Map>() : empty;
    FieldComparer inner(nested_map, prefix_ + std::string(name) + ".", mismatches_);
    T::fields(v, inner);
  }

 private:
  static bool is_zero_value(const Value& v) {
    return v.is<Nil>() || v == Value(false) || v == Value(std::uint64_t{0}) || v == Value("") || v == Value(Map{}) ||
           v == Value(Array{});
  }

  void compare(std::string_view name, const Value& actual) {
    const Value* listed = find(expected_, name);
    const Value expected = listed == nullptr || is_zero_value(*listed) ? Value() : *listed;
    if (canonical(expected) != canonical(actual)) {
      mismatches_.push_back(prefix_ + std::string(name) + ": expected " + typed_json_from_value(expected).dump() +
                            ", decoded " + typed_json_from_value(actual).dump());
    }
  }

  const Map& expected_;
  std::string prefix_;
  std::vector<std::string>& mismatches_;
};

void expect_decodes_as_listed(const Json& vector) {
  const std::string name = vector.at("name");
  const RawFrame frame = decode_one_frame(vector);
  EXPECT_EQ(frame.op(), vector.at("op").get<int>()) << name;
  EXPECT_EQ(to_hex(frame.payload()), vector.at("payload").get<std::string>()) << name;

  // The header as a plain MessagePack value, every key and type kept.
  const Value header = frame.header().empty() ? Value(Map{}) : *decode_value(frame.header());
  const Value expected = expected_header(vector);
  EXPECT_EQ(canonical(header), canonical(expected)) << name << ": decoded " << typed_json_from_value(header).dump();

  // The header as the op's typed struct.
  Result<Message> message = decode_frame(frame);
  ASSERT_TRUE(message.ok()) << name << ": " << message.error().msg;
  std::vector<std::string> mismatches;
  std::visit(
      [&](const auto& m) {
        FieldComparer comparer(*expected.get_if<Map>(), "", mismatches);
        std::decay_t<decltype(m)>::fields(m, comparer);
      },
      *message);
  EXPECT_TRUE(mismatches.empty()) << name << ": " << ::testing::PrintToString(mismatches);
}

TEST(Vectors, FramesCoverEveryOp) {
  std::set<int> ops;
  for (const Json& v : load("frames.json")) ops.insert(v.at("op").get<int>());
  for (const OpInfo& op : kOps) EXPECT_TRUE(ops.count(static_cast<int>(op.code))) << op.name;
}

TEST(Vectors, EveryFrameVectorDecodesToItsHeaderAndPayload) {
  for (const Json& v : load("frames.json")) expect_decodes_as_listed(v);
}

TEST(Vectors, EveryEncodingVariantDecodesToItsHeaderAndPayload) {
  for (const Json& v : load("encodings.json")) expect_decodes_as_listed(v);
}

TEST(Vectors, EveryFrameVectorDecodesTheSameFedOneByteAtATime) {
  for (const Json& v : load("frames.json")) {
    const Bytes bytes = *from_hex(v.at("frame").get<std::string>());
    FrameDecoder decoder(StreamSide::client, kDefaultMaxFrame);
    int frames = 0;
    for (std::uint8_t b : bytes) {
      if (decoder.feed(ByteView(&b, 1)).state == FrameDecoder::State::frame) {
        ++frames;
        EXPECT_TRUE(decode_frame(decoder.take_frame()).ok());
      }
    }
    EXPECT_EQ(frames, 1) << v.at("name");
  }
}

// What the decoder makes of an invalid vector: the first error, from framing or from the header.
Status reject(const Json& v) {
  Bytes input = *from_hex(v.at("input").get<std::string>());
  const std::size_t max_frame = v.at("max_frame").get<std::size_t>();
  if (v.at("framing") == "message") {
    auto frame = decode_message_frame(input, max_frame);
    if (!frame) return frame.error();
    auto message = decode_frame(*frame);
    return message ? Status() : message.error();
  }
  if (!v.at("includes_preamble").get<bool>()) input.insert(input.begin(), kPreamble.begin(), kPreamble.end());
  FrameDecoder decoder(StreamSide::server, max_frame);
  ByteView rest(input);
  while (!rest.empty()) {
    auto step = decoder.feed(rest);
    rest = rest.subspan(step.consumed);
    if (step.state == FrameDecoder::State::error) return decoder.error();
    if (step.state == FrameDecoder::State::frame) {
      auto message = decode_frame(decoder.take_frame());
      if (!message) return message.error();
    }
  }
  if (v.at("end_of_stream").get<bool>()) return decoder.finish();
  return std::nullopt;
}

TEST(Vectors, EveryInvalidVectorIsRejectedWithItsCodeAndFatality) {
  for (const Json& v : load("invalid.json")) {
    const std::string name = v.at("name");
    Status error = reject(v);
    ASSERT_TRUE(error) << name << " was accepted";
    EXPECT_EQ(error->code, v.at("code").get<int>()) << name << ": " << error->msg;
    EXPECT_EQ(error->fatal, v.at("fatal").get<bool>()) << name;
    if (v.contains("field")) {
      EXPECT_NE(error->msg.find("'" + v.at("field").get<std::string>() + "'"), std::string::npos)
          << name << ": " << error->msg;
    }
  }
}

TEST(Vectors, EveryUrlVectorParsesAsListed) {
  for (const Json& v : load("urls.json")) {
    const std::string name = v.at("name");
    auto url = parse_url(v.at("url").get<std::string>());
    if (v.contains("error")) {
      EXPECT_FALSE(url.ok()) << name << " was accepted";
      continue;
    }
    ASSERT_TRUE(url.ok()) << name << ": " << url.error();
    const Json& e = v.at("expect");
    EXPECT_EQ(*url, (Url{e.at("scheme"), e.at("tls"), e.at("websocket"), e.at("host"), e.at("port"), e.at("user"),
                         e.at("password"), e.at("vhost"), e.at("path")}))
        << name;
  }
}

}  // namespace
}  // namespace firemq
