#include "protocol/messages.h"

#include <msgpack.hpp>

#include <array>
#include <optional>
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
  FieldReader(Map& map, std::string prefix, std::uint64_t rid) : map_(map), prefix_(std::move(prefix)), rid_(rid) {}

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
        error_ = make_error(ReplyCode::syntax_error, "field '" + prefix_ + std::string(name) + "' appears twice", rid_);
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
bool is_zero(std::string_view v) { return v.empty(); }
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
  void write_value(std::string_view v) { write_str(v); }
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

// ---- The fast path: a header read straight from its MessagePack bytes ----
//
// The reading above builds the whole header as a Value map first, then reads the fields out of it: clear, and the
// source of every error message, but a publish's header then costs a Map, a Value per key and value, and their
// frees, on every frame. HeaderScanner reads the common case, a map of known fields with the types they must have,
// straight into the struct. Anything else (nil, a wrong type, a field sent twice, a key that is no str, an int
// in a signed format, bytes that are no MessagePack, a header deep or large) makes it give up, and the header is
// read the generic way, which decides and words every error: so both ways give the same result for every
// header (decode_header_generic; fuzz_header_decoder checks it on every input).
class HeaderScanner {
 public:
  explicit HeaderScanner(ByteView bytes) : bytes_(bytes) {}

  // Reads a whole header map into `out`; false: give up (the generic way decides).
  template <HasFields T>
  bool read_header(T& out) {
    return read_struct(out) && at_ == bytes_.size() && items_ <= kMaxScannedItems;
  }

 private:
  // Far inside the generic decoder's bounds (kMaxNesting, kMaxItems): what the scanner accepts, it accepts too.
  static constexpr int kMaxScannedDepth = 16;
  static constexpr std::size_t kMaxScannedItems = 4096;

  template <HasFields T>
  bool read_struct(T& out) {
    std::uint32_t count = 0;
    if (!map_header(count)) return false;
    ++items_;
    std::uint64_t seen = 0;  // bit i: the struct's field i was read
    for (std::uint32_t i = 0; i < count; ++i) {
      std::string_view key;
      if (!str(key)) return false;
      ++items_;
      bool known = false, ok = true;
      std::uint64_t bit = 1;
      T::fields(out, [&](std::string_view name, auto& field) {
        if (!known && name == key) {
          known = true;
          ok = (seen & bit) == 0 && read_value(field);
          seen |= bit;
        }
        bit <<= 1;
      });
      if (!known) ok = skip(1);
      if (!ok) return false;
    }
    return true;
  }

  bool read_value(std::uint64_t& out) {
    if (at_ >= bytes_.size()) return false;
    const std::uint8_t type = bytes_[at_];
    if (type <= 0x7f) {
      ++at_;
      out = type;
    } else if (type >= 0xcc && type <= 0xcf) {  // uint 8, 16, 32, 64
      if (!big_endian(std::size_t{1} << (type - 0xcc), out, 1)) return false;
    } else {
      return false;
    }
    ++items_;
    return true;
  }
  bool read_value(bool& out) {
    if (at_ >= bytes_.size() || (bytes_[at_] != 0xc2 && bytes_[at_] != 0xc3)) return false;
    out = bytes_[at_++] == 0xc3;
    ++items_;
    return true;
  }
  bool read_value(std::string& out) {
    std::string_view s;
    if (!str(s)) return false;
    out.assign(s);
    ++items_;
    return true;
  }
  bool read_value(StrList& out) {
    std::uint32_t count = 0;
    if (!array_header(count)) return false;
    ++items_;
    for (std::uint32_t i = 0; i < count; ++i) {
      if (!read_value(out.emplace_back())) return false;
    }
    return true;
  }
  bool read_value(Map& out) {
    if (at_ < bytes_.size() && bytes_[at_] == 0x80) {  // the empty map, as most props and headers are
      ++at_;
      ++items_;
      return true;
    }
    const std::size_t start = at_;
    if (!skip(1)) return false;
    Result<Value> value = decode_value(bytes_.subspan(start, at_ - start));
    if (!value || !value->is<Map>()) return false;
    out = std::move(*value->get_if<Map>());
    return true;
  }
  bool read_value(Props& out) {
    if (!read_value(out.entries)) return false;
    for (const PropSpec& spec : kPropSpecs) {
      const Value* v = find(out.entries, spec.name);
      if (v != nullptr && type_name(*v) != spec.type) return false;  // nil or a wrong type: the generic way
    }
    return true;
  }
  template <HasFields T>
  bool read_value(T& out) {
    return read_struct(out);
  }

  // Steps over `count` values (and what they hold), checking they are whole; counts their items.
  bool skip(std::size_t count, int depth = 1) {
    if (depth > kMaxScannedDepth) return false;
    for (std::size_t i = 0; i < count; ++i) {
      if (at_ >= bytes_.size() || ++items_ > kMaxScannedItems) return false;
      const std::uint8_t type = bytes_[at_];
      std::uint32_t inner = 0;
      if (map_header(inner)) {
        if (!skip(std::size_t{2} * inner, depth + 1)) return false;
      } else if (array_header(inner)) {
        if (!skip(inner, depth + 1)) return false;
      } else if (!skip_scalar(type)) {
        return false;
      }
    }
    return true;
  }

  bool skip_scalar(std::uint8_t type) {
    std::uint64_t size = 0;
    if (type <= 0x7f || type >= 0xe0 || type == 0xc0 || type == 0xc2 || type == 0xc3) return advance(1);
    if (type >= 0xa0 && type <= 0xbf) return advance(1 + (type & 0x1f));
    switch (type) {
      case 0xcc:
      case 0xd0: return advance(2);
      case 0xcd:
      case 0xd1: return advance(3);
      case 0xca:
      case 0xce:
      case 0xd2: return advance(5);
      case 0xcb:
      case 0xcf:
      case 0xd3: return advance(9);
      case 0xd4: return advance(3);  // fixext 1: type and data
      case 0xd5: return advance(4);
      case 0xd6: return advance(6);
      case 0xd7: return advance(10);
      case 0xd8: return advance(18);
      case 0xc4:
      case 0xd9: return big_endian(1, size, 1) && advance(size);  // bin 8, str 8
      case 0xc5:
      case 0xda: return big_endian(2, size, 1) && advance(size);
      case 0xc6:
      case 0xdb: return big_endian(4, size, 1) && advance(size);
      case 0xc7: return big_endian(1, size, 1) && advance(size + 1);  // ext 8: its type, then its data
      case 0xc8: return big_endian(2, size, 1) && advance(size + 1);
      case 0xc9: return big_endian(4, size, 1) && advance(size + 1);
      default: return false;  // 0xc1, never used
    }
  }

  bool map_header(std::uint32_t& count) { return container_header(0x80, 0xde, count); }
  bool array_header(std::uint32_t& count) { return container_header(0x90, 0xdc, count); }
  // A fixmap or fixarray (`fix`, its count in the low 4 bits), or the 16-bit or 32-bit form (`wide`, `wide` + 1).
  bool container_header(std::uint8_t fix, std::uint8_t wide, std::uint32_t& count) {
    if (at_ >= bytes_.size()) return false;
    const std::uint8_t type = bytes_[at_];
    std::uint64_t n = 0;
    if ((type & 0xf0) == fix) {
      ++at_;
      n = type & 0x0f;
    } else if (type == wide || type == wide + 1) {
      if (!big_endian(type == wide ? 2 : 4, n, 1)) return false;
    } else {
      return false;
    }
    count = static_cast<std::uint32_t>(n);
    return true;
  }

  bool str(std::string_view& out) {
    if (at_ >= bytes_.size()) return false;
    const std::uint8_t type = bytes_[at_];
    std::uint64_t size = 0;
    if (type >= 0xa0 && type <= 0xbf) {
      ++at_;
      size = type & 0x1f;
    } else if (type >= 0xd9 && type <= 0xdb) {
      if (!big_endian(std::size_t{1} << (type - 0xd9), size, 1)) return false;
    } else {
      return false;
    }
    if (size > bytes_.size() - at_) return false;
    out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + at_), size);
    at_ += size;
    return true;
  }

  // Reads a `width`-byte big-endian integer that follows `skip_first` bytes (the type byte) at at_, past both.
  bool big_endian(std::size_t width, std::uint64_t& out, std::size_t skip_first) {
    if (width + skip_first > bytes_.size() - at_) return false;
    out = 0;
    for (std::size_t i = 0; i < width; ++i) out = (out << 8) | bytes_[at_ + skip_first + i];
    at_ += skip_first + width;
    return true;
  }
  bool advance(std::uint64_t size) {
    if (size > bytes_.size() - at_) return false;
    at_ += size;
    return true;
  }

  ByteView bytes_;
  std::size_t at_ = 0;
  std::size_t items_ = 0;
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

// The fast path's reader for one op: the message, or nullopt to take the generic way.
template <class T>
std::optional<Message> scan_as(ByteView header) {
  T out;
  if (!HeaderScanner(header).read_header(out)) return std::nullopt;
  return Message(std::move(out));
}

// Decoders indexed by the position of their op in Message; built once from the variant's alternatives.
using Decoder = Result<Message> (*)(Map&);
using Scanner = std::optional<Message> (*)(ByteView);
template <std::size_t... I>
constexpr std::array<Decoder, sizeof...(I)> make_decoders(std::index_sequence<I...>) {
  return {&decode_as<std::variant_alternative_t<I, Message>>...};
}
template <std::size_t... I>
constexpr std::array<Scanner, sizeof...(I)> make_scanners(std::index_sequence<I...>) {
  return {&scan_as<std::variant_alternative_t<I, Message>>...};
}
constexpr auto kDecoders = make_decoders(std::make_index_sequence<std::variant_size_v<Message>>{});
constexpr auto kScanners = make_scanners(std::make_index_sequence<std::variant_size_v<Message>>{});

template <std::size_t... I>
constexpr std::array<OpCode, sizeof...(I)> make_codes(std::index_sequence<I...>) {
  return {std::variant_alternative_t<I, Message>::kOp...};
}
constexpr auto kCodes = make_codes(std::make_index_sequence<std::variant_size_v<Message>>{});

// The position in Message (and in kDecoders and kScanners) of each op code's struct; -1 for a code version 1 does
// not define.
constexpr std::array<int, 256> kIndexByCode = [] {
  std::array<int, 256> index{};
  index.fill(-1);
  for (std::size_t i = 0; i < kCodes.size(); ++i) index[static_cast<std::uint8_t>(kCodes[i])] = static_cast<int>(i);
  return index;
}();

std::string hex_byte(std::uint8_t b) {
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string{'0', 'x', kHex[b >> 4], kHex[b & 0xf]};
}

}  // namespace

OpCode op_of(const Message& message) {
  return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kOp; }, message);
}

Result<Message> decode_header(std::uint8_t code, ByteView header) {
  if (std::optional<Message> scanned = scan_header(code, header)) return std::move(*scanned);
  return decode_header_generic(code, header);
}

std::optional<Message> scan_header(std::uint8_t code, ByteView header) {
  const int index = kIndexByCode[code];
  if (index < 0 || header.empty()) return std::nullopt;
  return kScanners[index](header);
}

Result<Message> decode_header_generic(std::uint8_t code, ByteView header) {
  Result<Map> map = decode_header_map(header);
  if (const int index = kIndexByCode[code]; index >= 0) {
    if (!map) return map.error();
    return kDecoders[index](*map);
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

namespace {

// The frame of `op` appended to `out`: len and hlen are known once `write_header` has written the header after
// them; they are filled in then.
template <class WriteHeader>
void append_frame_of(Bytes& out, OpCode op, WriteHeader&& write_header, ByteView payload) {
  const std::size_t start = out.size();
  out.resize(start + kMinFrameSize);
  FieldWriter writer(out);
  write_header(writer);
  const std::size_t header_size = out.size() - start - kMinFrameSize;
  out.insert(out.end(), payload.begin(), payload.end());
  std::uint8_t* fixed = out.data() + start;
  write_u32_be(fixed, static_cast<std::uint32_t>(kFixedSize + header_size + payload.size()));
  fixed[kLenSize] = static_cast<std::uint8_t>(op);
  write_u32_be(fixed + kLenSize + 1, static_cast<std::uint32_t>(header_size));
}

}  // namespace

void append_frame(Bytes& out, const Message& message, ByteView payload) {
  const auto write_header = [&message](FieldWriter& writer) {
    std::visit([&writer](const auto& m) { writer.write(m); }, message);
  };
  append_frame_of(out, op_of(message), write_header, payload);
}

void append_frame(Bytes& out, const DeliverView& deliver, ByteView payload) {
  append_frame_of(
      out, OpCode::deliver, [&deliver](FieldWriter& writer) { writer.write(deliver); }, payload);
}

Bytes encode_message_frame(const Message& message, ByteView payload) {
  return frame_message(static_cast<std::uint8_t>(op_of(message)), encode_header(message), payload);
}

Map header_to_map(const Message& message) {
  Result<Value> value = decode_value(encode_header(message));
  return std::move(std::get<Map>(value->v));
}

}  // namespace firemq
