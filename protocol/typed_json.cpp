#include "protocol/typed_json.h"

#include <cmath>
#include <limits>

namespace firemq {
namespace {

using Json = nlohmann::json;
using ValueResult = Result<Value, std::string>;

constexpr std::int64_t kMaxSafeInteger = (std::int64_t{1} << 53) - 1;

Result<double, std::string> float_from_json(const Json& json) {
  if (json.is_number()) return json.get<double>();
  if (json == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (json == "Infinity") return std::numeric_limits<double>::infinity();
  if (json == "-Infinity") return -std::numeric_limits<double>::infinity();
  return std::string("a $float32 or $float64 must hold a number, \"NaN\", \"Infinity\" or \"-Infinity\"");
}

Json float_to_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return d;
}

ValueResult big_integer(const std::string& digits) {
  try {
    if (!digits.empty() && digits[0] == '-') return Value(static_cast<std::int64_t>(std::stoll(digits)));
    return Value(static_cast<std::uint64_t>(std::stoull(digits)));
  } catch (const std::exception&) {
    return "$int holds no 64-bit integer: \"" + digits + "\"";
  }
}

ValueResult from_tagged(const std::string& tag, const Json& body) {
  if (tag == "$int" && body.is_string()) return big_integer(body.get<std::string>());
  if (tag == "$float64" || tag == "$float32") {
    auto d = float_from_json(body);
    if (!d) return d.error();
    if (tag == "$float32") return Value(static_cast<float>(*d));
    return Value(*d);
  }
  if (tag == "$bin" && body.is_string()) {
    auto bytes = from_hex(body.get<std::string>());
    if (!bytes) return std::string("$bin holds no hex string");
    return Value(Bin{std::move(*bytes)});
  }
  if (tag == "$ext" && body.is_array() && body.size() == 2 && body[0].is_number_integer() && body[1].is_string()) {
    auto bytes = from_hex(body[1].get<std::string>());
    if (!bytes) return std::string("$ext data is no hex string");
    return Value(Ext{static_cast<std::int8_t>(body[0].get<int>()), std::move(*bytes)});
  }
  if (tag == "$map" && body.is_array()) {
    Map map;
    for (const Json& pair : body) {
      if (!pair.is_array() || pair.size() != 2) return std::string("$map entries are [key, value] pairs");
      auto key = value_from_typed_json(pair[0]);
      if (!key) return key.error();
      auto value = value_from_typed_json(pair[1]);
      if (!value) return value.error();
      map.push_back({std::move(*key), std::move(*value)});
    }
    return Value(std::move(map));
  }
  return "malformed " + tag + " value";
}

ValueResult from_object(const Json& json) {
  if (json.size() == 1 && json.begin().key().starts_with("$"))
    return from_tagged(json.begin().key(), json.begin().value());
  Map map;
  for (const auto& [key, item] : json.items()) {
    if (key.starts_with("$")) return "key \"" + key + "\" starts with $: such a map is written as $map";
    auto value = value_from_typed_json(item);
    if (!value) return value.error();
    map.push_back({Value(key), std::move(*value)});
  }
  return Value(std::move(map));
}

}  // namespace

Result<Value, std::string> value_from_typed_json(const Json& json) {
  switch (json.type()) {
    case Json::value_t::null: return Value(Nil{});
    case Json::value_t::boolean: return Value(json.get<bool>());
    case Json::value_t::number_unsigned: return Value(json.get<std::uint64_t>());
    case Json::value_t::number_integer: return Value(json.get<std::int64_t>());
    case Json::value_t::number_float:
      return std::string("a bare JSON float: floats are written {\"$float64\": n} or {\"$float32\": n}");
    case Json::value_t::string: return Value(json.get<std::string>());
    case Json::value_t::array: {
      Array items;
      for (const Json& item : json) {
        auto value = value_from_typed_json(item);
        if (!value) return value.error();
        items.push_back(std::move(*value));
      }
      return Value(std::move(items));
    }
    case Json::value_t::object: return from_object(json);
    default: return std::string("a JSON value of an unsupported type");
  }
}

Json typed_json_from_value(const Value& value) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Nil>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, std::uint64_t>) {
          if (v > static_cast<std::uint64_t>(kMaxSafeInteger)) return Json{{"$int", std::to_string(v)}};
          return v;
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          if (v < -kMaxSafeInteger) return Json{{"$int", std::to_string(v)}};
          return v;
        } else if constexpr (std::is_same_v<T, float>) {
          return Json{{"$float32", float_to_json(v)}};
        } else if constexpr (std::is_same_v<T, double>) {
          return Json{{"$float64", float_to_json(v)}};
        } else if constexpr (std::is_same_v<T, Bin>) {
          return Json{{"$bin", to_hex(v.bytes)}};
        } else if constexpr (std::is_same_v<T, Ext>) {
          return Json{{"$ext", Json::array({v.type, to_hex(v.data)})}};
        } else if constexpr (std::is_same_v<T, Array>) {
          Json out = Json::array();
          for (const Value& item : v) out.push_back(typed_json_from_value(item));
          return out;
        } else if constexpr (std::is_same_v<T, Map>) {
          bool plain = true;
          for (const MapEntry& e : v) {
            const auto* key = e.key.get_if<std::string>();
            plain = plain && key != nullptr && !key->starts_with("$");
          }
          Json out = plain ? Json::object() : Json::array();
          for (const MapEntry& e : v) {
            if (plain) {
              out[*e.key.get_if<std::string>()] = typed_json_from_value(e.value);
            } else {
              out.push_back(Json::array({typed_json_from_value(e.key), typed_json_from_value(e.value)}));
            }
          }
          return plain ? out : Json{{"$map", out}};
        } else {
          return v;  // bool, std::string
        }
      },
      value.v);
}

}  // namespace firemq
