#include "reference-broker/core/exchange_routing.h"

#include <vector>

#include "protocol/reply_codes.h"

namespace firemq {
namespace {

std::vector<std::string_view> split_words(std::string_view key) {
  std::vector<std::string_view> words;
  if (key.empty()) return words;  // "" has zero words
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    words.push_back(key.substr(start, dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return words;
}

// The x-match of a headers binding, "all" when absent.
std::string_view x_match(const Map& args) {
  const Value* v = find(args, "x-match");
  const auto* s = v ? v->get_if<std::string>() : nullptr;
  return s ? std::string_view(*s) : std::string_view("all");
}

}  // namespace

std::optional<ExchangeType> parse_exchange_type(std::string_view name) {
  if (name == "direct") return ExchangeType::direct;
  if (name == "fanout") return ExchangeType::fanout;
  if (name == "topic") return ExchangeType::topic;
  if (name == "headers") return ExchangeType::headers;
  return std::nullopt;
}

std::string_view exchange_type_name(ExchangeType type) {
  switch (type) {
    case ExchangeType::direct: return "direct";
    case ExchangeType::fanout: return "fanout";
    case ExchangeType::topic: return "topic";
    case ExchangeType::headers: return "headers";
  }
  return "direct";
}

bool topic_matches(std::string_view pattern, std::string_view routing_key) {
  const auto p = split_words(pattern);
  const auto k = split_words(routing_key);
  // matched[i][j]: the first i pattern words match the first j key words. One row at a time.
  std::vector<char> previous(k.size() + 1, 0), current(k.size() + 1, 0);
  previous[0] = 1;
  for (std::size_t i = 1; i <= p.size(); ++i) {
    current.assign(k.size() + 1, 0);
    for (std::size_t j = 0; j <= k.size(); ++j) {
      if (p[i - 1] == "#") {
        current[j] = previous[j] || (j > 0 && current[j - 1]);  // "#" takes no word, or one more
      } else if (j > 0) {
        current[j] = previous[j - 1] && (p[i - 1] == "*" || p[i - 1] == k[j - 1]);
      }
    }
    previous.swap(current);
  }
  return previous[k.size()] != 0;
}

Status check_headers_binding(const Map& binding_args) {
  const Value* v = find(binding_args, "x-match");
  if (v == nullptr) return std::nullopt;
  const auto* s = v->get_if<std::string>();
  if (s && (*s == "all" || *s == "any" || *s == "all-with-x" || *s == "any-with-x")) return std::nullopt;
  return make_error(ReplyCode::precondition_failed,
                    "invalid x-match for a headers binding: expected all, any, all-with-x or any-with-x");
}

bool headers_match(const Map& binding_args, const Map& message_headers) {
  const std::string_view mode = x_match(binding_args);
  const bool want_all = mode == "all" || mode == "all-with-x";
  const bool with_x = mode == "all-with-x" || mode == "any-with-x";
  for (const MapEntry& entry : binding_args) {
    const auto* key = entry.key.get_if<std::string>();
    if (key == nullptr || *key == "x-match") continue;
    if (!with_x && key->starts_with("x-")) continue;
    const Value* actual = find(message_headers, *key);
    const bool matched = actual != nullptr && (entry.value.is<Nil>() || *actual == entry.value);
    if (want_all && !matched) return false;
    if (!want_all && matched) return true;
  }
  // all: every checked key matched ("all" of nothing is true); any: none did ("any" of nothing is false).
  return want_all;
}

Result<std::vector<std::string>> sender_selected_keys(const Map& headers) {
  std::vector<std::string> keys;
  for (const MapEntry& e : headers) {
    const auto* name = e.key.get_if<std::string>();
    if (name == nullptr || (*name != "CC" && *name != "BCC")) continue;
    const auto* routes = e.value.get_if<Array>();
    if (routes == nullptr) {
      return make_error(ReplyCode::precondition_failed,
                        "invalid header '" + *name + "': expected an array of routing keys");
    }
    for (const Value& route : *routes) {
      if (const auto* key = route.get_if<std::string>()) keys.push_back(*key);
    }
  }
  return keys;
}

void remove_blind_copies(Map& headers) {
  std::erase_if(headers, [](const MapEntry& e) { return e.key == Value("BCC"); });
}

}  // namespace firemq
