#include "protocol/amqp/content.h"

namespace firemq::amqp {
namespace {

// amqp::property's places are kBasicProperties'.
static_assert(kBasicProperties[property::kContentType].name == "content_type");
static_assert(kBasicProperties[property::kHeaders].name == "headers");
static_assert(kBasicProperties[property::kDeliveryMode].name == "delivery_mode");
static_assert(kBasicProperties[property::kCorrelationId].name == "correlation_id");
static_assert(kBasicProperties[property::kExpiration].name == "expiration");
static_assert(kBasicProperties[property::kTimestamp].name == "timestamp");
static_assert(kBasicProperties[property::kClusterId].name == "cluster_id");
static_assert(kBasicProperties[property::kContentEncoding].name == "content_encoding");
static_assert(kBasicProperties[property::kPriority].name == "priority");
static_assert(kBasicProperties[property::kReplyTo].name == "reply_to");
static_assert(kBasicProperties[property::kMessageId].name == "message_id");
static_assert(kBasicProperties[property::kType].name == "type");
static_assert(kBasicProperties[property::kUserId].name == "user_id");
static_assert(kBasicProperties[property::kAppId].name == "app_id");

std::optional<std::size_t> property_index(std::string_view name) {
  for (std::size_t i = 0; i < kBasicProperties.size(); ++i) {
    if (kBasicProperties[i].name == name) return i;
  }
  return std::nullopt;
}

// Property i is flagged by bit 15 - i of the first flag word; bit 0 of each word says another word follows.
constexpr std::uint16_t flag_of(std::size_t i) { return static_cast<std::uint16_t>(1u << (15 - i)); }

Error syntax_error(std::string msg) { return connection_error(502, "content header: " + std::move(msg)); }

// The property flag words: the first names the 14 properties; any continuation word must be empty, since the
// basic class has no more properties.
Result<std::uint16_t> read_flags(WireReader& in) {
  const std::uint16_t flags = in.u16();
  if (flags & 0x0002) return syntax_error("property flag bit 1 is set, but the basic class has 14 properties");
  for (std::uint16_t more = flags; (more & 1) != 0 && !in.failed();) {
    more = in.u16();
    if ((more & ~1u) != 0)
      return syntax_error("a continuation of the property flags names properties the basic class lacks");
  }
  return flags;
}

}  // namespace

const Arg* ContentHeader::get(std::string_view name) const {
  auto i = property_index(name);
  return i && properties[*i] ? &*properties[*i] : nullptr;
}

ContentHeader& ContentHeader::set(std::string_view name, Arg value) {
  if (auto i = property_index(name)) properties[*i] = std::move(value);
  return *this;
}

Status decode_content_header_into(ByteView payload, ContentHeader& h) {
  WireReader in(payload);
  h.class_id = in.u16();
  in.u16();  // weight, "must be zero", unused
  h.body_size = in.u64();
  auto flags = read_flags(in);
  if (!flags) return flags.error();
  for (std::size_t i = 0; i < kBasicProperties.size(); ++i) {
    if ((*flags & flag_of(i)) == 0) {
      h.properties[i].reset();
      continue;
    }
    Status table_error;
    h.properties[i] = read_field(in, kBasicProperties[i].type, table_error);
    if (table_error) return syntax_error(std::string(kBasicProperties[i].name) + ": " + table_error->msg);
  }
  if (in.failed()) return syntax_error("truncated (" + std::to_string(payload.size()) + " bytes)");
  if (!in.at_end()) return syntax_error(std::to_string(in.remaining()) + " bytes after the last property");
  return std::nullopt;
}

Result<ContentHeader> decode_content_header(ByteView payload) {
  ContentHeader h;
  if (Status bad = decode_content_header_into(payload, h)) return *bad;
  return h;
}

namespace {

void write_content_header(WireWriter& w, const ContentHeader& header, std::uint64_t body_size) {
  w.u16(header.class_id);
  w.u16(0);
  w.u64(body_size);
  std::uint16_t flags = 0;
  for (std::size_t i = 0; i < kBasicProperties.size(); ++i) {
    if (header.properties[i]) flags |= flag_of(i);
  }
  w.u16(flags);
  for (std::size_t i = 0; i < kBasicProperties.size(); ++i) {
    if (header.properties[i]) write_field(w, kBasicProperties[i].type, *header.properties[i]);
  }
}

}  // namespace

Bytes encode_content_header(const ContentHeader& header) {
  Bytes out;
  WireWriter w(out);
  write_content_header(w, header, header.body_size);
  return out;
}

void append_content(Bytes& out, std::uint16_t channel, const ContentHeader& header, ByteView body,
                    std::size_t frame_max) {
  const std::size_t header_at = begin_frame(out, FrameType::header, channel);
  WireWriter w(out);
  write_content_header(w, header, body.size());
  end_frame(out, header_at);
  const std::size_t chunk = frame_max == 0 ? body.size() : frame_max - kFrameOverhead;
  for (std::size_t at = 0; at < body.size(); at += chunk) {
    const std::size_t body_at = begin_frame(out, FrameType::body, channel);
    const ByteView part = body.subspan(at, std::min(chunk, body.size() - at));
    out.insert(out.end(), part.begin(), part.end());
    end_frame(out, body_at);
  }
}

Bytes encode_content(std::uint16_t channel, const Method& method, ContentHeader header, ByteView body,
                     std::size_t frame_max) {
  Bytes out = encode_frame(FrameType::method, channel, encode_method(method));
  append_content(out, channel, header, body, frame_max);
  return out;
}

}  // namespace firemq::amqp
