#include "protocol/amqp/content.h"

namespace firemq::amqp {
namespace {

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

Result<ContentHeader> decode_content_header(ByteView payload) {
  WireReader in(payload);
  ContentHeader h;
  h.class_id = in.u16();
  in.u16();  // weight, "must be zero", unused
  h.body_size = in.u64();
  auto flags = read_flags(in);
  if (!flags) return flags.error();
  for (std::size_t i = 0; i < kBasicProperties.size(); ++i) {
    if ((*flags & flag_of(i)) == 0) continue;
    Status table_error;
    h.properties[i] = read_field(in, kBasicProperties[i].type, table_error);
    if (table_error) return syntax_error(std::string(kBasicProperties[i].name) + ": " + table_error->msg);
  }
  if (in.failed()) return syntax_error("truncated (" + std::to_string(payload.size()) + " bytes)");
  if (!in.at_end()) return syntax_error(std::to_string(in.remaining()) + " bytes after the last property");
  return h;
}

Bytes encode_content_header(const ContentHeader& header) {
  Bytes out;
  WireWriter w(out);
  w.u16(header.class_id);
  w.u16(0);
  w.u64(header.body_size);
  std::uint16_t flags = 0;
  for (std::size_t i = 0; i < kBasicProperties.size(); ++i) {
    if (header.properties[i]) flags |= flag_of(i);
  }
  w.u16(flags);
  for (std::size_t i = 0; i < kBasicProperties.size(); ++i) {
    if (header.properties[i]) write_field(w, kBasicProperties[i].type, *header.properties[i]);
  }
  return out;
}

Bytes encode_content(std::uint16_t channel, const Method& method, ContentHeader header, ByteView body,
                     std::size_t frame_max) {
  Bytes out = encode_frame(FrameType::method, channel, encode_method(method));
  header.body_size = body.size();
  Bytes h = encode_frame(FrameType::header, channel, encode_content_header(header));
  out.insert(out.end(), h.begin(), h.end());
  const std::size_t chunk = frame_max == 0 ? body.size() : frame_max - kFrameOverhead;
  for (std::size_t at = 0; at < body.size(); at += chunk) {
    Bytes b = encode_frame(FrameType::body, channel, body.subspan(at, std::min(chunk, body.size() - at)));
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

}  // namespace firemq::amqp
