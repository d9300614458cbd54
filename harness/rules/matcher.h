// Matching a received header against a case's pattern (docs/case-format.md, "Matchers").
//
// A pattern is typed JSON (vectors/README.md) in which an object with one "$operator" key is a matcher:
//   {"$one_of": [a, b]}  any of the alternatives (each a pattern)
//   {"$ge": n} {"$gt": n} {"$le": n} {"$lt": n}   integer comparisons
//   {"$type": "uint"}    the MessagePack type ("nil", "bool", "uint", "int", "float32", "float64", "str", "bin",
//                        "ext", "array", "map")
//   {"$present": true}   present with any value;   {"$absent": true}: omitted (or nil)
//   {"$zero": true}      omitted or its zero value;  {"$nonzero": true}: present and not a zero value
//   {"$contains": "s"}   a str containing s
//   {"$eq": v}           exactly v (a map must have exactly v's keys)
//   {"$capture": "name"} anything present; stored as variable name for later steps
//   {"$some": p}         an array with at least one element matching p (its captures are kept)
// An object pattern matches a map that has at least its keys, each matching; other keys are ignored. A key
// the pattern expects with a zero value (false, 0, "", {}, []) also matches when omitted, as the spec's
// "Omitted header fields take their zero value" says.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "protocol/value.h"

namespace firemq::conform {

using Vars = std::map<std::string, Value>;

// "" when `actual` (nullptr: the field is absent) matches `pattern`; otherwise what differs, naming `path`.
std::string match_value(const nlohmann::json& pattern, const Value* actual, const std::string& path, Vars& vars);

// A readable rendering of a Value for failure messages (typed JSON, shortened).
std::string show(const Value* value);

}  // namespace firemq::conform
