// AMQP 0-9-1 content: the content header frame (the spec's 4.2.6.1) and its basic-class properties, then body
// frames. The 14 properties are one table (name, type, in flag order: bit 15 is the first); the header's codec
// walks it, with the same field readers as the methods (methods.h).
//
//   class-id : u16 | weight : u16 (0) | body-size : u64 | property-flags : u16 ... | properties present
#pragma once

#include <array>
#include <optional>

#include "protocol/amqp/frame.h"
#include "protocol/amqp/methods.h"

namespace firemq::amqp {

// The basic class's properties, in flag order.
inline constexpr std::array<FieldSpec, 14> kBasicProperties = {{
    {"content_type", FieldType::shortstr},
    {"content_encoding", FieldType::shortstr},
    {"headers", FieldType::table},
    {"delivery_mode", FieldType::octet},
    {"priority", FieldType::octet},
    {"correlation_id", FieldType::shortstr},
    {"reply_to", FieldType::shortstr},
    {"expiration", FieldType::shortstr},
    {"message_id", FieldType::shortstr},
    {"timestamp", FieldType::timestamp},
    {"type", FieldType::shortstr},
    {"user_id", FieldType::shortstr},
    {"app_id", FieldType::shortstr},
    {"cluster_id", FieldType::shortstr},
}};

// Each property's place in kBasicProperties, for the code that names them without looking them up.
namespace property {
inline constexpr std::size_t kContentType = 0, kContentEncoding = 1, kHeaders = 2, kDeliveryMode = 3, kPriority = 4,
                             kCorrelationId = 5, kReplyTo = 6, kExpiration = 7, kMessageId = 8, kTimestamp = 9,
                             kType = 10, kUserId = 11, kAppId = 12, kClusterId = 13;
}

struct ContentHeader {
  std::uint16_t class_id = kBasicClass;
  std::uint64_t body_size = 0;
  std::array<std::optional<Arg>, kBasicProperties.size()> properties;  // absent: its flag is clear

  // A property by name (kBasicProperties) or by its place (amqp::property); nullptr when absent.
  const Arg* get(std::string_view name) const;
  const Arg* get(std::size_t index) const { return properties[index] ? &*properties[index] : nullptr; }
  ContentHeader& set(std::string_view name, Arg value);
  ContentHeader& set(std::size_t index, Arg value) {
    properties[index] = std::move(value);
    return *this;
  }
  bool operator==(const ContentHeader&) const = default;
};

// The payload of a content header frame. 502 syntax-error when truncated, with trailing bytes, a flag set
// beyond the 14 properties, or a bad headers table.
Result<ContentHeader> decode_content_header(ByteView payload);
// The same into a header that is already there (a channel's publish under way), with no header to move.
Status decode_content_header_into(ByteView payload, ContentHeader& header);
Bytes encode_content_header(const ContentHeader& header);

// A method with content, as frames on `channel`: the method, the content header, then the body cut into frames
// of at most `frame_max` bytes (0: one body frame). An empty body has no body frame.
Bytes encode_content(std::uint16_t channel, const Method& method, ContentHeader header, ByteView body,
                     std::size_t frame_max);
// The content after its method, appended in place to `out`: the header frame (its body size is the body's), then
// the body frames, as encode_content writes them.
void append_content(Bytes& out, std::uint16_t channel, const ContentHeader& header, ByteView body,
                    std::size_t frame_max);

}  // namespace firemq::amqp
