#include "protocol/msgpack_codec.h"

#include <msgpack.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "protocol/reply_codes.h"

namespace firemq {
namespace {

// Builds a Value from msgpack-cxx's parse events. Containers under construction sit on `open_`; a finished
// item is appended to the innermost one (or becomes the root).
class ValueBuilder : public msgpack::null_visitor {
 public:
  bool visit_nil() { return emit(Value(Nil{})); }
  bool visit_boolean(bool v) { return emit(Value(v)); }
  bool visit_positive_integer(std::uint64_t v) { return emit(Value(v)); }
  bool visit_negative_integer(std::int64_t v) { return emit(Value(v)); }
  bool visit_float32(float v) { return emit(Value(v)); }
  bool visit_float64(double v) { return emit(Value(v)); }
  bool visit_str(const char* v, std::uint32_t size) { return emit(Value(std::string(v, size))); }
  bool visit_bin(const char* v, std::uint32_t size) { return emit(Value(Bin{to_bytes(v, size)})); }
  // msgpack-cxx passes the ext type byte as the first byte of the data.
  bool visit_ext(const char* v, std::uint32_t size) {
    return emit(Value(Ext{static_cast<std::int8_t>(v[0]), to_bytes(v + 1, size - 1)}));
  }

  // Declared element counts are trusted only up to kTrustedCount: a small container is allocated once, and a
  // count no bytes back up reserves no more than that.
  bool start_array(std::uint32_t declared) {
    Array items;
    items.reserve(std::min<std::uint32_t>(declared, kTrustedCount));
    return open(Value(std::move(items)));
  }
  bool end_array() { return close(); }
  bool start_map(std::uint32_t declared) {
    Map entries;
    entries.reserve(std::min<std::uint32_t>(declared, kTrustedCount));
    return open(Value(std::move(entries)));
  }
  bool start_map_key() {
    open_.back().in_key = true;
    return true;
  }
  bool end_map_key() {
    open_.back().in_key = false;
    return true;
  }
  bool end_map() { return close(); }

  bool too_deep() const { return too_deep_; }
  bool too_many() const { return too_many_; }
  Value take_root() { return std::move(root_); }

 private:
  static constexpr std::uint32_t kTrustedCount = 16;
  struct OpenContainer {
    Value value;  // an Array or a Map
    bool in_key = false;
  };

  static Bytes to_bytes(const char* v, std::size_t size) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(v);
    return Bytes(p, p + size);
  }

  bool open(Value container) {
    if (open_.size() >= kMaxNesting) {
      too_deep_ = true;
      return false;
    }
    open_.push_back(OpenContainer{std::move(container)});
    return true;
  }

  bool close() {
    Value done = std::move(open_.back().value);
    open_.pop_back();
    return emit(std::move(done));
  }

  bool emit(Value item) {
    if (++items_ > kMaxItems) {
      too_many_ = true;
      return false;
    }
    if (open_.empty()) {
      root_ = std::move(item);
      return true;
    }
    OpenContainer& top = open_.back();
    if (auto* array = std::get_if<Array>(&top.value.v)) {
      array->push_back(std::move(item));
    } else if (top.in_key) {
      std::get<Map>(top.value.v).push_back(MapEntry{std::move(item), Value()});
    } else {
      std::get<Map>(top.value.v).back().value = std::move(item);
    }
    return true;
  }

  std::vector<OpenContainer> open_;
  Value root_;
  bool too_deep_ = false;
  bool too_many_ = false;
  std::size_t items_ = 0;
};

Error syntax_error(std::string msg) { return make_error(ReplyCode::syntax_error, std::move(msg)); }

msgpack::parse_return parse(ByteView bytes, std::size_t& offset, ValueBuilder& builder) {
  try {
    return msgpack::detail::parse_imp(reinterpret_cast<const char*>(bytes.data()), bytes.size(), offset, builder);
  } catch (const msgpack::ext_size_overflow&) {
    // msgpack-cxx throws for an ext32 that declares 0xffffffff bytes, before it checks the bytes exist.
    // Contained here so that nothing a peer sends can throw past the codec.
    return msgpack::PARSE_PARSE_ERROR;
  }
}

}  // namespace

Result<Value> decode_value(ByteView bytes) {
  if (bytes.empty()) return syntax_error("no MessagePack value: the bytes are empty");
  ValueBuilder builder;
  std::size_t offset = 0;
  switch (parse(bytes, offset, builder)) {
    case msgpack::PARSE_SUCCESS: return builder.take_root();
    case msgpack::PARSE_EXTRA_BYTES:
      return syntax_error(std::to_string(bytes.size() - offset) + " trailing bytes after the MessagePack value");
    case msgpack::PARSE_CONTINUE:
      return syntax_error("truncated MessagePack value: it needs more than the " + std::to_string(bytes.size()) +
                          " bytes given");
    case msgpack::PARSE_STOP_VISITOR:
      if (builder.too_deep()) {
        return syntax_error("MessagePack value nests deeper than " + std::to_string(kMaxNesting) + " levels");
      }
      if (builder.too_many()) {
        return syntax_error("MessagePack value has more than " + std::to_string(kMaxItems) + " items");
      }
      return syntax_error("invalid MessagePack value");
    default: return syntax_error("invalid MessagePack value");
  }
}

namespace {

using Packer = msgpack::packer<ByteSink>;

void pack(Packer& pk, ByteSink& sink, const Value& value);

// msgpack-cxx 4's pack_float and pack_double write a float with an integral value as an integer (1.0 becomes
// 1), which would change the type a publisher sent; so floats are written here, always as float32/float64.
template <class F, class Bits>
void pack_float_exactly(ByteSink& sink, std::uint8_t marker, F value) {
  Bits bits;
  static_assert(sizeof bits == sizeof value);
  std::memcpy(&bits, &value, sizeof bits);
  sink.out.push_back(marker);
  for (int shift = 8 * (sizeof bits - 1); shift >= 0; shift -= 8) {
    sink.out.push_back(static_cast<std::uint8_t>(bits >> shift));
  }
}

void pack_map(Packer& pk, ByteSink& sink, const Map& map) {
  pk.pack_map(static_cast<std::uint32_t>(map.size()));
  for (const MapEntry& entry : map) {
    pack(pk, sink, entry.key);
    pack(pk, sink, entry.value);
  }
}

void pack(Packer& pk, ByteSink& sink, const Value& value) {
  std::visit(
      [&pk, &sink](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Nil>) {
          pk.pack_nil();
        } else if constexpr (std::is_same_v<T, float>) {
          pack_float_exactly<float, std::uint32_t>(sink, 0xca, v);
        } else if constexpr (std::is_same_v<T, double>) {
          pack_float_exactly<double, std::uint64_t>(sink, 0xcb, v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          pk.pack_str(static_cast<std::uint32_t>(v.size()));
          pk.pack_str_body(v.data(), static_cast<std::uint32_t>(v.size()));
        } else if constexpr (std::is_same_v<T, Bin>) {
          pk.pack_bin(static_cast<std::uint32_t>(v.bytes.size()));
          pk.pack_bin_body(reinterpret_cast<const char*>(v.bytes.data()), static_cast<std::uint32_t>(v.bytes.size()));
        } else if constexpr (std::is_same_v<T, Ext>) {
          pk.pack_ext(v.data.size(), v.type);
          pk.pack_ext_body(reinterpret_cast<const char*>(v.data.data()), static_cast<std::uint32_t>(v.data.size()));
        } else if constexpr (std::is_same_v<T, Array>) {
          pk.pack_array(static_cast<std::uint32_t>(v.size()));
          for (const Value& item : v) pack(pk, sink, item);
        } else if constexpr (std::is_same_v<T, Map>) {
          pack_map(pk, sink, v);
        } else {
          pk.pack(v);  // bool, uint64, int64: msgpack-cxx picks the smallest format
        }
      },
      value.v);
}

}  // namespace

void encode_value(const Value& value, Bytes& out) {
  ByteSink sink{out};
  Packer pk(sink);
  pack(pk, sink, value);
}

void encode_map(const Map& map, Bytes& out) {
  ByteSink sink{out};
  Packer pk(sink);
  pack_map(pk, sink, map);
}

}  // namespace firemq
