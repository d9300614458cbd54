#include "harness/rules/matcher.h"

#include <set>

#include "protocol/typed_json.h"

namespace firemq::conform {
namespace {

using Json = nlohmann::json;
__extension__ typedef __int128 Int128;  // wide enough for every uint64 and int64

const std::set<std::string>& operators() {
  static const std::set<std::string> ops = {"$one_of", "$ge",   "$gt",      "$le",       "$lt", "$type",    "$present",
                                            "$absent", "$zero", "$nonzero", "$contains", "$eq", "$capture", "$some"};
  return ops;
}

bool is_operator(const Json& pattern) {
  return pattern.is_object() && pattern.size() == 1 && operators().count(pattern.begin().key());
}

bool is_zero_value(const Value& v) {
  return v.is<Nil>() || v == Value(false) || v == Value(std::uint64_t{0}) || v == Value("") || v == Value(Map{}) ||
         v == Value(Array{});
}

std::string mismatch(const std::string& path, const std::string& expected, const Value* actual) {
  return (path.empty() ? "header" : "'" + path + "'") + ": expected " + expected + ", got " + show(actual);
}

// Integer comparisons: the actual value as a signed 128-bit number, so uint64 and int64 compare correctly.
std::string compare_integer(const std::string& op, const Json& bound, const Value* actual, const std::string& path) {
  Int128 a = 0;
  if (actual && actual->is<std::uint64_t>()) {
    a = *actual->get_if<std::uint64_t>();
  } else if (actual && actual->is<std::int64_t>()) {
    a = *actual->get_if<std::int64_t>();
  } else if (actual == nullptr || actual->is<Nil>()) {
    a = 0;  // omitted means 0
  } else {
    return mismatch(path, "an integer " + op.substr(1) + " " + bound.dump(), actual);
  }
  const Int128 b = bound.is_number_unsigned() ? Int128(bound.get<std::uint64_t>()) : Int128(bound.get<std::int64_t>());
  const bool ok = op == "$ge" ? a >= b : op == "$gt" ? a > b : op == "$le" ? a <= b : a < b;
  return ok ? "" : mismatch(path, op.substr(1) + " " + bound.dump(), actual);
}

std::string match_operator(const std::string& op, const Json& arg, const Value* actual, const std::string& path,
                           Vars& vars) {
  const bool present = actual != nullptr && !actual->is<Nil>();
  if (op == "$some") {
    // An array with at least one element matching: the management API's lists, in an order the case cannot know.
    const Array* items = actual ? actual->get_if<Array>() : nullptr;
    if (items == nullptr) return mismatch(path, "an array", actual);
    for (std::size_t i = 0; i < items->size(); ++i) {
      Vars attempt = vars;
      if (match_value(arg, &(*items)[i], path + "[" + std::to_string(i) + "]", attempt).empty()) {
        vars = std::move(attempt);
        return "";
      }
    }
    return mismatch(path, "an element matching " + arg.dump(), actual);
  }
  if (op == "$one_of") {
    std::string reasons;
    for (const Json& alternative : arg) {
      Vars attempt = vars;
      if (match_value(alternative, actual, path, attempt).empty()) {
        vars = std::move(attempt);
        return "";
      }
    }
    return mismatch(path, "one of " + arg.dump(), actual);
  }
  if (op == "$ge" || op == "$gt" || op == "$le" || op == "$lt") return compare_integer(op, arg, actual, path);
  if (op == "$type") {
    const std::string want = arg.get<std::string>();
    return present && type_name(*actual) == want ? "" : mismatch(path, "a value of type " + want, actual);
  }
  if (op == "$present") return present ? "" : mismatch(path, "the field to be present", actual);
  if (op == "$absent") return present ? mismatch(path, "the field to be absent", actual) : "";
  if (op == "$zero") return !present || is_zero_value(*actual) ? "" : mismatch(path, "its zero value", actual);
  if (op == "$nonzero") return present && !is_zero_value(*actual) ? "" : mismatch(path, "a non-zero value", actual);
  if (op == "$contains") {
    const auto* s = present ? actual->get_if<std::string>() : nullptr;
    return s && s->find(arg.get<std::string>()) != std::string::npos
               ? ""
               : mismatch(path, "a str containing " + arg.dump(), actual);
  }
  if (op == "$eq") {
    auto expected = value_from_typed_json(arg);
    if (!expected) return "bad pattern at '" + path + "': " + expected.error();
    return present && *actual == *expected ? "" : mismatch(path, "exactly " + arg.dump(), actual);
  }
  // $capture
  if (!present) return mismatch(path, "a value to capture", actual);
  vars[arg.get<std::string>()] = *actual;
  return "";
}

std::string match_map(const Json& pattern, const Value* actual, const std::string& path, Vars& vars) {
  const Map empty;
  const Map* map = actual ? actual->get_if<Map>() : nullptr;
  if (actual && !actual->is<Nil>() && map == nullptr) return mismatch(path, "a map", actual);
  if (map == nullptr) map = &empty;
  for (const auto& [key, sub] : pattern.items()) {
    const std::string sub_path = path.empty() ? key : path + "." + key;
    if (std::string bad = match_value(sub, find(*map, key), sub_path, vars); !bad.empty()) return bad;
  }
  return "";
}

std::string match_array(const Json& pattern, const Value* actual, const std::string& path, Vars& vars) {
  const Array empty;
  const Array* items = actual ? actual->get_if<Array>() : nullptr;
  if (actual && !actual->is<Nil>() && items == nullptr) return mismatch(path, "an array", actual);
  if (items == nullptr) items = &empty;
  if (items->size() != pattern.size()) return mismatch(path, pattern.dump(), actual);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const std::string sub_path = path + "[" + std::to_string(i) + "]";
    if (std::string bad = match_value(pattern[i], &(*items)[i], sub_path, vars); !bad.empty()) return bad;
  }
  return "";
}

bool is_typed_literal(const Json& pattern) {
  return pattern.is_object() && pattern.size() == 1 && pattern.begin().key().starts_with("$");
}

}  // namespace

std::string show(const Value* value) {
  if (value == nullptr) return "nothing (absent)";
  std::string text = typed_json_from_value(*value).dump();
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text;
}

std::string match_value(const Json& pattern, const Value* actual, const std::string& path, Vars& vars) {
  if (is_operator(pattern)) return match_operator(pattern.begin().key(), pattern.begin().value(), actual, path, vars);
  if (pattern.is_object() && !is_typed_literal(pattern)) return match_map(pattern, actual, path, vars);
  if (pattern.is_array()) return match_array(pattern, actual, path, vars);
  auto expected = value_from_typed_json(pattern);
  if (!expected) return "bad pattern at '" + path + "': " + expected.error();
  const bool absent = actual == nullptr || actual->is<Nil>();
  if (absent && is_zero_value(*expected)) return "";
  if (!absent && *actual == *expected) return "";
  return mismatch(path, pattern.dump(), actual);
}

}  // namespace firemq::conform
