#include "reference-broker/core/argument_bounds.h"

#include "protocol/msgpack_codec.h"
#include "protocol/reply_codes.h"
#include "protocol/utf8.h"

namespace firemq {

namespace {

bool all_text_utf8(const Value& value) {
  if (const auto* text = value.get_if<std::string>()) return is_valid_utf8(*text);
  if (const auto* array = value.get_if<Array>()) {
    for (const Value& item : *array) {
      if (!all_text_utf8(item)) return false;
    }
  }
  if (const auto* map = value.get_if<Map>()) {
    for (const MapEntry& entry : *map) {
      if (!all_text_utf8(entry.key) || !all_text_utf8(entry.value)) return false;
    }
  }
  return true;
}

}  // namespace

Status check_text(std::string_view what, const std::string& text) {
  if (is_valid_utf8(text)) return std::nullopt;
  return make_error(ReplyCode::syntax_error, "the " + std::string(what) + " is not UTF-8");
}

Status check_arguments(const Map& args, const std::string& owner) {
  if (args.empty()) return std::nullopt;
  Bytes encoded;
  encode_map(args, encoded);
  if (encoded.size() > kMaxArgumentsBytes) {
    // "506 resource-error: Server out of a resource", as for the other bounds no client can push past.
    return make_error(ReplyCode::resource_error, "the arguments of " + owner + " are " +
                                                     std::to_string(encoded.size()) + " bytes, over the limit of " +
                                                     std::to_string(kMaxArgumentsBytes) + " (MessagePack-encoded)");
  }
  // Bounded in depth by the decoder (kMaxNesting), so the walk is too.
  for (const MapEntry& entry : args) {
    if (!all_text_utf8(entry.key) || !all_text_utf8(entry.value)) {
      return make_error(ReplyCode::syntax_error, "the arguments of " + owner + " hold a str that is not UTF-8");
    }
  }
  return std::nullopt;
}

}  // namespace firemq
