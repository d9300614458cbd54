#include "protocol/value.h"

#include <cstring>

namespace firemq {

Value::Value(std::int64_t i) {
  if (i >= 0) {
    v = static_cast<std::uint64_t>(i);
  } else {
    v = i;
  }
}

namespace {

template <class F>
bool same_bits(F a, F b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

bool Value::operator==(const Value& other) const {
  if (v.index() != other.v.index()) return false;
  if (const auto* f = get_if<float>()) return same_bits(*f, *other.get_if<float>());
  if (const auto* d = get_if<double>()) return same_bits(*d, *other.get_if<double>());
  return v == other.v;
}

const Value* find(const Map& map, std::string_view key) {
  for (const MapEntry& entry : map) {
    const auto* name = entry.key.get_if<std::string>();
    if (name != nullptr && *name == key) return &entry.value;
  }
  return nullptr;
}

std::string_view type_name(const Value& v) {
  static constexpr std::string_view kNames[] = {"nil", "bool", "uint", "int",   "float32", "float64",
                                                "str", "bin",  "ext",  "array", "map"};
  return kNames[v.v.index()];
}

}  // namespace firemq
