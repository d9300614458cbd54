#include "protocol/amqp/field_table.h"

#include <bit>
#include <cstring>

#include "protocol/reply_codes.h"

namespace firemq::amqp {
namespace {

Error syntax_error(std::string msg) {
  Error e = make_error(ReplyCode::syntax_error, std::move(msg));
  e.fatal = true;
  return e;
}

// Reads one table or array and everything inside it, with the nesting depth carried down and the items counted
// across all of it.
class ValueReader {
 public:
  ValueReader(WireReader& in, std::size_t& items) : in_(in), items_(items) {}

  Result<FieldTable> table(int depth);
  Result<FieldArray> array(int depth);

 private:
  Result<FieldValue> value(char letter, int depth);
  Result<FieldValue> scalar(char letter);
  // The bytes of a length-prefixed table or array, as a reader of their own.
  Result<ByteView> sized_body(const char* what, int depth);

  // One more item (an entry or an element) of the outermost table: past kMaxTableItems, an error.
  Status count_item();

  WireReader& in_;
  std::size_t& items_;
};

Status ValueReader::count_item() {
  if (++items_ <= kMaxTableItems) return std::nullopt;
  return syntax_error("field table has more than " + std::to_string(kMaxTableItems) + " items");
}

Result<ByteView> ValueReader::sized_body(const char* what, int depth) {
  if (depth > kMaxTableNesting) {
    return syntax_error(std::string(what) + " nested deeper than " + std::to_string(kMaxTableNesting) + " levels");
  }
  const std::uint32_t size = in_.u32();
  ByteView body = in_.take(size);
  if (in_.failed()) return syntax_error(std::string(what) + " of " + std::to_string(size) + " bytes is truncated");
  return body;
}

Result<FieldTable> ValueReader::table(int depth) {
  auto body = sized_body("field table", depth);
  if (!body) return body.error();
  WireReader in(*body);
  ValueReader inner(in, items_);
  FieldTable table;
  while (!in.at_end()) {
    if (Status over = count_item()) return std::move(*over);
    std::string name = in.shortstr();
    const char letter = static_cast<char>(in.u8());
    if (in.failed())
      return syntax_error("field table entry truncated after " + std::to_string(table.size()) + " entries");
    auto v = inner.value(letter, depth + 1);
    if (!v) return syntax_error("field table entry '" + name + "': " + v.error().msg);
    table.push_back({std::move(name), std::move(*v)});
  }
  return table;
}

Result<FieldArray> ValueReader::array(int depth) {
  auto body = sized_body("field array", depth);
  if (!body) return body.error();
  WireReader in(*body);
  ValueReader inner(in, items_);
  FieldArray array;
  while (!in.at_end()) {
    if (Status over = count_item()) return std::move(*over);
    const char letter = static_cast<char>(in.u8());
    auto v = inner.value(letter, depth + 1);
    if (!v) return syntax_error("field array element " + std::to_string(array.size()) + ": " + v.error().msg);
    array.push_back(std::move(*v));
  }
  return array;
}

Result<FieldValue> ValueReader::value(char letter, int depth) {
  if (letter == 'F') {
    auto t = table(depth);
    if (!t) return t.error();
    return FieldValue(std::move(*t));
  }
  if (letter == 'A') {
    auto a = array(depth);
    if (!a) return a.error();
    return FieldValue(std::move(*a));
  }
  auto v = scalar(letter);
  if (v && in_.failed()) return syntax_error(std::string("value of type '") + letter + "' is truncated");
  return v;
}

Result<FieldValue> ValueReader::scalar(char letter) {
  switch (letter) {
    case 'V': return FieldValue(Void{});
    case 't': return FieldValue(in_.u8() != 0);
    case 'b': return FieldValue(static_cast<std::int8_t>(in_.u8()));
    case 'B': return FieldValue(in_.u8());
    case 's': return FieldValue(static_cast<std::int16_t>(in_.u16()));
    case 'u': return FieldValue(in_.u16());
    case 'I': return FieldValue(static_cast<std::int32_t>(in_.u32()));
    case 'i': return FieldValue(in_.u32());
    // RabbitMQ also parses `L` as a 64-bit integer; it is kept as `l` (docs/spec-notes.md).
    case 'l':
    case 'L': return FieldValue(static_cast<std::int64_t>(in_.u64()));
    case 'f': return FieldValue(std::bit_cast<float>(in_.u32()));
    case 'd': return FieldValue(std::bit_cast<double>(in_.u64()));
    case 'D': {
      const std::uint8_t scale = in_.u8();
      return FieldValue(Decimal{scale, static_cast<std::int32_t>(in_.u32())});
    }
    case 'S': return FieldValue(in_.longstr());
    case 'x': {
      ByteView b = in_.take(in_.u32());
      return FieldValue(ByteArray{Bytes(b.begin(), b.end())});
    }
    case 'T': return FieldValue(Timestamp{in_.u64()});
    default: break;
  }
  const auto byte = static_cast<unsigned>(static_cast<std::uint8_t>(letter));
  return syntax_error("unknown field type 0x" + to_hex(ByteView(reinterpret_cast<const std::uint8_t*>(&letter), 1)) +
                      (byte >= 0x20 && byte < 0x7f ? std::string(" '") + letter + "'" : std::string()));
}

void write_value(WireWriter& out, const FieldValue& value);

void write_array(WireWriter& out, const FieldArray& array) {
  const std::size_t at = out.begin_length();
  for (const FieldValue& v : array) {
    out.u8(static_cast<std::uint8_t>(v.type_letter()));
    write_value(out, v);
  }
  out.end_length(at);
}

void write_value(WireWriter& out, const FieldValue& value) {
  std::visit(
      [&out](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Void>) {
        } else if constexpr (std::is_same_v<T, bool>) {
          out.u8(x ? 1 : 0);
        } else if constexpr (std::is_same_v<T, float>) {
          out.u32(std::bit_cast<std::uint32_t>(x));
        } else if constexpr (std::is_same_v<T, double>) {
          out.u64(std::bit_cast<std::uint64_t>(x));
        } else if constexpr (std::is_integral_v<T> && sizeof(T) == 1) {
          out.u8(static_cast<std::uint8_t>(x));
        } else if constexpr (std::is_integral_v<T> && sizeof(T) == 2) {
          out.u16(static_cast<std::uint16_t>(x));
        } else if constexpr (std::is_integral_v<T> && sizeof(T) == 4) {
          out.u32(static_cast<std::uint32_t>(x));
        } else if constexpr (std::is_integral_v<T> && sizeof(T) == 8) {
          out.u64(static_cast<std::uint64_t>(x));
        } else if constexpr (std::is_same_v<T, Decimal>) {
          out.u8(x.scale), out.u32(static_cast<std::uint32_t>(x.value));
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.longstr(x);
        } else if constexpr (std::is_same_v<T, ByteArray>) {
          out.u32(static_cast<std::uint32_t>(x.bytes.size())), out.bytes(x.bytes);
        } else if constexpr (std::is_same_v<T, Timestamp>) {
          out.u64(x.seconds);
        } else if constexpr (std::is_same_v<T, FieldArray>) {
          write_array(out, x);
        } else if constexpr (std::is_same_v<T, FieldTable>) {
          write_table(out, x);
        }
      },
      value.v);
}

}  // namespace

const FieldValue* find(const FieldTable& table, std::string_view name) {
  for (const FieldEntry& e : table) {
    if (e.name == name) return &e.value;
  }
  return nullptr;
}

Result<FieldTable> read_table(WireReader& in) {
  std::size_t items = 0;
  return ValueReader(in, items).table(1);
}

void write_table(WireWriter& out, const FieldTable& table) {
  const std::size_t at = out.begin_length();
  for (const FieldEntry& e : table) {
    out.shortstr(e.name);
    out.u8(static_cast<std::uint8_t>(e.value.type_letter()));
    write_value(out, e.value);
  }
  out.end_length(at);
}

}  // namespace firemq::amqp
