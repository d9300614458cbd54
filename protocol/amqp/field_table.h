// AMQP 0-9-1 field tables and field arrays, with the type letters RabbitMQ uses (which differ from the 0-9-1
// spec's own table and its errata: RabbitMQ's `s` is a signed 16-bit integer, `u` unsigned 16, `I` signed 32,
// `i` unsigned 32, `l` signed 64, `x` a byte array; docs/spec-notes.md, "AMQP field types").
//
// A FieldValue keeps the exact type it was sent with, so a table passes through the broker unchanged, and the
// interop table (reference-broker/amqp/amqp_interop.h) converts it to and from MessagePack in one place.
//
// Decoding never throws: a truncated value, an unknown type letter, nesting deeper than kMaxTableNesting or more
// than kMaxTableItems items is a 502 syntax-error naming what was wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "protocol/amqp/wire.h"
#include "protocol/error.h"

namespace firemq::amqp {

// Tables and arrays inside tables: deeper than this is refused, before it can exhaust the stack.
inline constexpr int kMaxTableNesting = 64;
// Entries and elements of one table, all levels counted: more is refused, as the FireMQ decoder refuses a header
// of more than kMaxItems (msgpack_codec.h), since each costs tens of bytes once decoded.
inline constexpr std::size_t kMaxTableItems = 65536;

struct Void {  // `V`
  bool operator==(const Void&) const = default;
};
struct Decimal {  // `D`: value / 10^scale
  std::uint8_t scale = 0;
  std::int32_t value = 0;
  bool operator==(const Decimal&) const = default;
};
struct ByteArray {  // `x`
  Bytes bytes;
  bool operator==(const ByteArray&) const = default;
};
struct Timestamp {  // `T`: seconds since the Unix epoch
  std::uint64_t seconds = 0;
  bool operator==(const Timestamp&) const = default;
};

struct FieldValue;
struct FieldEntry;
using FieldArray = std::vector<FieldValue>;  // `A`
using FieldTable = std::vector<FieldEntry>;  // `F`; entries in the order sent

struct FieldValue {
  // In the order of kTypeLetters.
  using Variant =
      std::variant<Void, bool, std::int8_t, std::uint8_t, std::int16_t, std::uint16_t, std::int32_t, std::uint32_t,
                   std::int64_t, float, double, Decimal, std::string, ByteArray, FieldArray, Timestamp, FieldTable>;
  // RabbitMQ's letter for each alternative of Variant: t bool, b int8, B uint8, s int16, u uint16, I int32,
  // i uint32, l int64, f float, d double, D decimal, S long string, x byte array, A array, T timestamp, F table.
  static constexpr std::string_view kTypeLetters = "VtbBsuIilfdDSxATF";

  Variant v;

  FieldValue();
  template <class T>
    requires std::is_constructible_v<Variant, T>
  FieldValue(T value);  // NOLINT: implicit, as the variant's alternatives
  FieldValue(const char* s);

  char type_letter() const { return kTypeLetters[v.index()]; }
  template <class T>
  const T* get_if() const {
    return std::get_if<T>(&v);
  }
  bool operator==(const FieldValue& other) const;
};

struct FieldEntry {
  std::string name;
  FieldValue value;
  bool operator==(const FieldEntry&) const = default;
};

inline FieldValue::FieldValue() = default;
template <class T>
  requires std::is_constructible_v<FieldValue::Variant, T>
inline FieldValue::FieldValue(T value) : v(std::move(value)) {}
inline FieldValue::FieldValue(const char* s) : v(std::string(s)) {}
inline bool FieldValue::operator==(const FieldValue& other) const { return v == other.v; }

// The value under `name`, or nullptr; the first entry wins when a name repeats.
const FieldValue* find(const FieldTable& table, std::string_view name);

// A table as it appears in a method or a content header: u32 size, then name (shortstr), type letter, value.
Result<FieldTable> read_table(WireReader& in);
void write_table(WireWriter& out, const FieldTable& table);

}  // namespace firemq::amqp
