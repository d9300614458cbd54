#include "protocol/bounded_json.h"

namespace firemq {

Result<nlohmann::json, std::string> parse_bounded_json(std::string_view text, std::size_t max_depth) {
  using Json = nlohmann::json;
  bool too_deep = false;
  // `depth` is the number of containers already open around the event: a container opened at depth N is
  // level N + 1. Returning false discards the element, so nothing past the bound is ever built.
  auto bound_depth = [&too_deep, max_depth](int depth, Json::parse_event_t event, Json&) {
    const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    if (opens && static_cast<std::size_t>(depth) >= max_depth) too_deep = true;
    return !too_deep;
  };
  try {
    Json parsed = Json::parse(text, bound_depth, true);
    if (too_deep) return "nested deeper than " + std::to_string(max_depth) + " levels";
    return parsed;
  } catch (const Json::exception& e) {
    // A syntax error (parse_error), or a number too large for a double (out_of_range 406, "1e999999"), which
    // nlohmann throws even from its parse: each is the text's fault, never the process's.
    if (too_deep) return "nested deeper than " + std::to_string(max_depth) + " levels";
    return std::string("not JSON: ") + e.what();
  }
}

}  // namespace firemq
