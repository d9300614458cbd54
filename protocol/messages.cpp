#include "protocol/messages.h"

#include <msgpack.hpp>

#include <array>
#include <string>
#include <type_traits>
#include <utility>

#include "protocol/msgpack_codec.h"
#include "protocol/reply_codes.h"

namespace firemq {
namespace {

template <class T>
concept HasFields = requires(T& t) { T::fields(t, [](std::string_view, auto&) {}); };

// The message properties the spec's table names, with the MessagePack type each must have.
struct PropSpec {
  std::string_view name;
  std::string_view type;  // "str" or "uint", as type_name() spells them
};
constexpr std::array<PropSpec, 11> kPropSpecs = {{
    {"content_type", "str"},
    {"content_encoding", "str"},
    {"correlation_id", "str"},
    {"reply_to", "str"},
    {"expiration", "uint"},
    {"message_id", "str"},
    {"timestamp", "uint"},
    {"type", "str"},
    {"user_id", "str"},
    {"app_id", "str"},
    {"priority", "uint"},
}};

// Reads a header map into a struct's fields, moving each value out of the map (which is the decoder's own, and
// dropped after). The first error wins; later fields are skipped.
class FieldReader {
 public:
  FieldReader(Map& map, std::string prefix, std::uint64_t rid) : map_(map), prefix_(std::move(prefix)),
                                                                 rid_(rid) {}

  void operator()(std::string_view name, std::uint64_t& out) { read_as<std::uint64_t>(name, out, "uint"); }
  void operator()(std::string_view name, bool& out) { read_as<bool>(name, out, "bool"); }
  void operator()(std::string_view name, std::string& out) { read_as<std::string>(name, out, "str"); }
  void operator()(std::string_view name, Map& out) { read_as<Map>(name, out, "map"); }

  void operator()(std::string_view name, StrList& out) {
    Value* v = lookup(name);
    if (v == nullptr) return;
    auto* items = v->get_if<Array>();
    if (items == nullptr) return wrong_type(name, "array of str", *v);
    for (Value& item : *items) {
      auto* s = item.get_if<std::string>();
      if (s == nullptr) return wrong_type(name, "array of str", item);
      out.push_back(std::move(*s));
    }
  }

  void operator()(std::string_view name, Props& out) {
    Map entries;
    read_as<Map>(name, entries, "map");
    if (error_) return;
    for (const PropSpec& spec : kPropSpecs) {
      const Value* v = find(entries, spec.name);
      if (v != nullptr && !v->is<Nil>() && type_name(*v) != spec.type) {
        return wrong_type(std::string(name) + "." + std::string(spec.name), spec.type, *v);
      }
    }
    out.entries = std::move(entries);
  }

  template <HasFields T>
  void operator()(std::string_view name, T& out) {
    Map nested;
    read_as<Map>(name, nested, "map");
    if (error_) return;
    FieldReader reader(nested, prefix_ + std::string(name) + ".", rid_);
    T::fields(out, reader);
    if (reader.error_) error_ = std::move(reader.error_);
  }

  Status take_error() { return std::move(error_); }

 private:
  // The value of a field, or nullptr when it is absent, nil, or an earlier field failed. A field sent twice
  // is refused: two readers of one frame must never see two different values (docs/spec-notes.md).
  Value* lookup(std::string_view name) {
    if (error_) return nullptr;
    Value* found = nullptr;
    for (MapEntry& entry : map_) {
      const auto* key = entry.key.get_if<std::string>();
      if (key == nullptr || *key != name) continue;
      if (found != nullptr) {
        error_ = make_error(ReplyCode::syntax_error, "field '" + prefix_ + std::string(name) + "' appears twice",
                            rid_);
        return nullptr;
      }
      found = &entry.value;
    }
    if (found == nullptr || found->is<Nil>()) return nullptr;
    return found;
  }

  template <class T>
  void read_as(std::string_view name, T& out, std::string_view expected) {
    Value* v = lookup(name);
    if (v == nullptr) return;
    if (auto* typed = v->get_if<T>()) {
      out = std::move(*typed);
    } else {
      wrong_type(name, expected, *v);
    }
  }

  void wrong_type(std::string_view name, std::string_view expected, const Value& got) {
    error_ = make_error(ReplyCode::syntax_error,
                        "field '" + prefix_ + std::string(name) + "' must be " + std::string(expected) + ", got " +
                            std::string(type_name(got)),
                        rid_);
  }

  Map& map_;
  std::string prefix_;
  std::uint64_t rid_;
  Status error_;
};

// The zero value of each field type: what an omitted field means, and what the encoder leaves out.
bool is_zero(std::uint64_t v) { return v == 0; }
bool is_zero(bool v) { return !v; }
bool is_zero(const std::string& v) { return v.empty(); }
bool is_zero(const Map& v) { return v.empty(); }
bool is_zero(const StrList& v) { return v.empty(); }
bool is_zero(const Props& v) { return v.entries.empty(); }
template <HasFields T>
bool is_zero(const T& v) {
  return v == T{};
}

// Writes a struct's non-zero fields as a MessagePack map, in two passes: count, then pack.
class FieldWriter {
 public:
  explicit FieldWriter(Bytes& out) : out_(out), sink_{out}, pk_(sink_) {}

  template <HasFields T>
  void write(const T& s) {
    std::uint32_t count = 0;
    T::fields(s, [&count](std::string_view, const auto& v) { count += is_zero(v) ? 0 : 1; });
    pk_.pack_map(count);
    T::fields(s, [this](std::string_view name, const auto& v) {
      if (is_zero(v)) return;
      write_str(name);
      write_value(v);
    });
  }

 private:
  void write_str(std::string_view s) {
    pk_.pack_str(static_cast<std::uint32_t>(s.size()));
    pk_.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
  }
  void write_value(std::uint64_t v) { pk_.pack(v); }
  void write_value(bool v) { pk_.pack(v); }
  void write_value(const std::string& v) { write_str(v); }
  // The packer writes straight through to out_, so a map can be appended there directly.
  void write_value(const Map& v) { encode_map(v, out_); }
  void write_value(const Props& v) { write_value(v.entries); }
  void write_value(const StrList& v) {
    pk_.pack_array(static_cast<std::uint32_t>(v.size()));
    for (const std::string& s : v) write_str(s);
  }
  template <HasFields T>
  void write_value(const T& v) {
    write(v);
  }

  Bytes& out_;
  ByteSink sink_;
  msgpack::packer<ByteSink> pk_;
};

// The rid of a request, read leniently so that an error about another field can still echo it.
std::uint64_t readable_rid(const Map& map) {
  const Value* v = find(map, "rid");
  const auto* rid = v ? v->get_if<std::uint64_t>() : nullptr;
  return rid ? *rid : 0;
}

Result<Map> decode_header_map(ByteView header) {
  if (header.empty()) return Map{};  // "hlen may be 0, meaning an empty map"
  Result<Value> value = decode_value(header);
  if (!value) {
    Error e = value.error();
    e.msg = "header is not a MessagePack map: " + e.msg;
    return e;
  }
  auto* map = std::get_if<Map>(&value->v);
  if (map == nullptr) {
    return make_error(ReplyCode::syntax_error,
                      "header is not a MessagePack map: got " + std::string(type_name(*value)));
  }
  for (const MapEntry& entry : *map) {
    if (!entry.key.is<std::string>()) {
      return make_error(ReplyCode::syntax_error,
                        "header keys must be str, got a key of type " + std::string(type_name(entry.key)),
                        readable_rid(*map));
    }
  }
  return std::move(*map);
}

template <class T>
Result<Message> decode_as(Map& map) {
  T out;
  FieldReader reader(map, "", readable_rid(map));
  T::fields(out, reader);
  if (Status bad = reader.take_error()) return std::move(*bad);
  return Message(std::move(out));
}

// Decoders indexed by the position of their op in Message; built once from the variant's alternatives.
using Decoder = Result<Message> (*)(Map&);
template <std::size_t... I>
constexpr std::array<Decoder, sizeof...(I)> make_decoders(std::index_sequence<I...>) {
  return {&decode_as<std::variant_alternative_t<I, Message>>...};
}
constexpr auto kDecoders = make_decoders(std::make_index_sequence<std::variant_size_v<Message>>{});

template <std::size_t... I>
constexpr std::array<OpCode, sizeof...(I)> make_codes(std::index_sequence<I...>) {
  return {std::variant_alternative_t<I, Message>::kOp...};
}
constexpr auto kCodes = make_codes(std::make_index_sequence<std::variant_size_v<Message>>{});

std::string hex_byte(std::uint8_t b) {
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string{'0', 'x', kHex[b >> 4], kHex[b & 0xf]};
}

}  // namespace

OpCode op_of(const Message& message) {
  return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kOp; }, message);
}

Result<Message> decode_header(std::uint8_t code, ByteView header) {
  Result<Map> map = decode_header_map(header);
  for (std::size_t i = 0; i < kCodes.size(); ++i) {
    if (static_cast<std::uint8_t>(kCodes[i]) != code) continue;
    if (!map) return map.error();
    return kDecoders[i](*map);
  }
  // "A server that receives an unknown op replies error with code 540 and keeps the connection open."
  return make_error(ReplyCode::not_implemented, "unknown op " + hex_byte(code) + ": version 1 does not define it",
                    map ? readable_rid(*map) : 0);
}

Result<Message> decode_frame(const RawFrame& frame) {
  const OpInfo* info = find_op(frame.op());
  if (info != nullptr && !info->has_payload && !frame.payload().empty()) {
    return make_error(ReplyCode::frame_error, std::string(info->name) + " carries no payload, got " +
                                                  std::to_string(frame.payload().size()) + " payload bytes");
  }
  return decode_header(frame.op(), frame.header());
}

Bytes encode_header(const Message& message) {
  Bytes out;
  FieldWriter writer(out);
  std::visit([&writer](const auto& m) { writer.write(m); }, message);
  return out;
}

Bytes encode_frame(const Message& message, ByteView payload) {
  Bytes out;
  append_frame(out, message, payload);
  return out;
}

void append_frame(Bytes& out, const Message& message, ByteView payload) {
  // len and hlen are known once the header is written after them; they are filled in then.
  const std::size_t start = out.size();
  out.resize(start + kMinFrameSize);
  FieldWriter writer(out);
  std::visit([&writer](const auto& m) { writer.write(m); }, message);
  const std::size_t header_size = out.size() - start - kMinFrameSize;
  out.insert(out.end(), payload.begin(), payload.end());
  std::uint8_t* fixed = out.data() + start;
  write_u32_be(fixed, static_cast<std::uint32_t>(kFixedSize + header_size + payload.size()));
  fixed[kLenSize] = static_cast<std::uint8_t>(op_of(message));
  write_u32_be(fixed + kLenSize + 1, static_cast<std::uint32_t>(header_size));
}

Bytes encode_message_frame(const Message& message, ByteView payload) {
  return frame_message(static_cast<std::uint8_t>(op_of(message)), encode_header(message), payload);
}

Map header_to_map(const Message& message) {
  Result<Value> value = decode_value(encode_header(message));
  return std::move(std::get<Map>(value->v));
}

}  // namespace firemq
