// The typed-JSON convention of the vector files (vectors/README.md): how a MessagePack value is written in
// JSON without losing its type. nil null, bool, str as themselves; integers as JSON integers up to 2^53-1 in
// magnitude, else {"$int": "<decimal>"}; {"$float32": n} and {"$float64": n} ("NaN", "Infinity",
// "-Infinity" as strings); {"$bin": "<hex>"}; {"$ext": [type, "<hex>"]}; arrays as arrays; maps as objects
// when every key is a str not starting with "$", else {"$map": [[key, value], ...]}.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "protocol/error.h"
#include "protocol/value.h"

namespace firemq {

// The Value a typed-JSON document stands for; the error names what does not follow the convention.
Result<Value, std::string> value_from_typed_json(const nlohmann::json& json);

// The typed JSON of a Value (the inverse of value_from_typed_json).
nlohmann::json typed_json_from_value(const Value& value);

}  // namespace firemq
