// A MessagePack value kept losslessly: message props, application headers, queue and binding arguments pass
// through the broker with every type they were sent with (nil, bool, signed and unsigned ints, float32 and
// float64, str, bin, array, map with keys of any type, ext). Maps keep their encoded order.
//
// Integers are held by value, not by encoded width: a non-negative integer is always a uint64, a negative one
// an int64, whichever MessagePack format carried it (int8 5 and uint32 5 are the same value).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/bytes.h"

namespace firemq {

struct Value;
struct MapEntry;
using Array = std::vector<Value>;
using Map = std::vector<MapEntry>;

struct Nil {
  bool operator==(const Nil&) const = default;
};
struct Bin {
  Bytes bytes;
  bool operator==(const Bin&) const = default;
};
struct Ext {
  std::int8_t type = 0;
  Bytes data;
  bool operator==(const Ext&) const = default;
};

struct Value {
  using Variant =
      std::variant<Nil, bool, std::uint64_t, std::int64_t, float, double, std::string, Bin, Ext, Array, Map>;
  Variant v;

  // Defined below MapEntry: constructing the variant needs MapEntry complete.
  Value();
  Value(Nil);
  Value(bool b);
  Value(std::uint64_t u);
  Value(std::int64_t i);  // stored as uint64 when non-negative
  Value(int i);
  Value(float f);
  Value(double d);
  Value(std::string s);
  Value(const char* s);
  Value(Bin b);
  Value(Ext e);
  Value(Array a);
  Value(Map m);

  template <class T>
  bool is() const {
    return std::holds_alternative<T>(v);
  }
  template <class T>
  const T* get_if() const {
    return std::get_if<T>(&v);
  }
  template <class T>
  T* get_if() {
    return std::get_if<T>(&v);
  }

  // Exact equality: same type and value; floats compare bit for bit (so NaN equals the same NaN).
  bool operator==(const Value& other) const;
};

struct MapEntry {
  Value key;
  Value value;
  bool operator==(const MapEntry&) const = default;
};

inline Value::Value() = default;
inline Value::Value(Nil) {}
inline Value::Value(bool b) : v(b) {}
inline Value::Value(std::uint64_t u) : v(u) {}
inline Value::Value(int i) : Value(static_cast<std::int64_t>(i)) {}
inline Value::Value(float f) : v(f) {}
inline Value::Value(double d) : v(d) {}
inline Value::Value(std::string s) : v(std::move(s)) {}
inline Value::Value(const char* s) : v(std::string(s)) {}
inline Value::Value(Bin b) : v(std::move(b)) {}
inline Value::Value(Ext e) : v(std::move(e)) {}
inline Value::Value(Array a) : v(std::move(a)) {}
inline Value::Value(Map m) : v(std::move(m)) {}

// The value stored under the string key `key`, or nullptr. The first entry wins if a key repeats.
const Value* find(const Map& map, std::string_view key);

// The MessagePack type of `v` as the spec names it ("uint", "str", "map", ...), for error messages.
std::string_view type_name(const Value& v);

}  // namespace firemq
