// Values as plain JSON, as RabbitMQ's management API writes queue arguments, client properties and message
// properties (the broker's management API, and the harness reading it): not the typed JSON of the vectors. Integers and floats as numbers, strings
// and booleans as themselves, nil as null, arrays and maps (with string keys) as arrays and objects; bin and ext,
// which JSON has no form for, as base64 text (RabbitMQ shows field-table byte arrays the same way).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "protocol/error.h"
#include "protocol/value.h"

namespace firemq {

nlohmann::json plain_json(const Value& value);
nlohmann::json plain_json(const Map& map);  // an object; non-string keys are written as their JSON text

// What an API request's JSON (queue arguments, message properties) stands for: integers as int or uint, other
// numbers as float64, objects as maps with str keys. The error names what has no MessagePack form. A value is
// held to the wire's bounds (msgpack_codec.h: kMaxNesting levels, kMaxItems items), whatever JSON it came in.
Result<Value, std::string> value_from_plain_json(const nlohmann::json& json);
Result<Map, std::string> map_from_plain_json(const nlohmann::json& json);  // an object, or null for none

}  // namespace firemq
