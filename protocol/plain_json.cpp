#include "protocol/plain_json.h"

#include <optional>

#include "protocol/msgpack_codec.h"

namespace firemq {
namespace {

using Json = nlohmann::json;

std::string key_text(const Value& key) {
  if (const auto* s = key.get_if<std::string>()) return *s;
  return plain_json(key).dump();
}

}  // namespace

Json plain_json(const Map& map) {
  Json out = Json::object();
  for (const MapEntry& e : map) out[key_text(e.key)] = plain_json(e.value);
  return out;
}

Json plain_json(const Value& value) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Nil>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, Bin>) {
          return to_base64(v.bytes);
        } else if constexpr (std::is_same_v<T, Ext>) {
          return to_base64(v.data);
        } else if constexpr (std::is_same_v<T, Array>) {
          Json out = Json::array();
          for (const Value& item : v) out.push_back(plain_json(item));
          return out;
        } else if constexpr (std::is_same_v<T, Map>) {
          return plain_json(v);
        } else {
          return v;  // bool, integers, floats, str
        }
      },
      value.v);
}

namespace {

// What a value read from JSON may still take: the wire's bounds (msgpack_codec.h), so that nothing built from an
// HTTP body or a definitions file is a value the wire would have refused.
struct Budget {
  std::size_t depth = 0;
  std::size_t items = 0;

  std::optional<std::string> enter() {
    if (++depth > kMaxNesting) return "nested deeper than " + std::to_string(kMaxNesting) + " levels";
    return std::nullopt;
  }
  std::optional<std::string> count(std::size_t more) {
    items += more;
    if (items > kMaxItems) return "more than " + std::to_string(kMaxItems) + " items";
    return std::nullopt;
  }
};

Result<Map, std::string> map_from(const Json& json, Budget& budget);

Result<Value, std::string> value_from(const Json& json, Budget& budget) {
  if (auto over = budget.count(1)) return *over;
  switch (json.type()) {
    case Json::value_t::null: return Value(Nil{});
    case Json::value_t::boolean: return Value(json.get<bool>());
    case Json::value_t::number_unsigned: return Value(json.get<std::uint64_t>());
    case Json::value_t::number_integer: return Value(json.get<std::int64_t>());
    case Json::value_t::number_float: return Value(json.get<double>());
    case Json::value_t::string: return Value(json.get<std::string>());
    case Json::value_t::array: {
      if (auto over = budget.enter()) return *over;
      Array out;
      for (const Json& item : json) {
        auto v = value_from(item, budget);
        if (!v) return v.error();
        out.push_back(std::move(*v));
      }
      --budget.depth;
      return Value(std::move(out));
    }
    case Json::value_t::object: {
      auto map = map_from(json, budget);
      if (!map) return map.error();
      return Value(std::move(*map));
    }
    default: return "a JSON " + std::string(json.type_name()) + " has no MessagePack form";
  }
}

Result<Map, std::string> map_from(const Json& json, Budget& budget) {
  if (auto over = budget.enter()) return *over;
  if (auto over = budget.count(json.size())) return *over;  // the keys
  Map out;
  for (const auto& [key, item] : json.items()) {
    auto v = value_from(item, budget);
    if (!v) return "'" + key + "': " + v.error();
    out.push_back({Value(key), std::move(*v)});
  }
  --budget.depth;
  return out;
}

}  // namespace

Result<Value, std::string> value_from_plain_json(const Json& json) {
  Budget budget;
  return value_from(json, budget);
}

Result<Map, std::string> map_from_plain_json(const Json& json) {
  if (json.is_null()) return Map{};
  if (!json.is_object()) return "expected an object, got " + std::string(json.type_name());
  Budget budget;
  return map_from(json, budget);
}

}  // namespace firemq
