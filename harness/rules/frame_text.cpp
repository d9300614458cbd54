#include "harness/rules/frame_text.h"

#include <algorithm>

#include "protocol/msgpack_codec.h"
#include "protocol/ops.h"
#include "protocol/typed_json.h"

namespace firemq::conform {
namespace {

constexpr std::size_t kPreviewBytes = 64;
constexpr std::size_t kSummaryBytes = 4096;

// Passwords never reach a report: CI artifacts are read by more people than the broker's admins.
void redact_password(Value& header) {
  auto* map = std::get_if<Map>(&header.v);
  if (map == nullptr) return;
  for (MapEntry& e : *map) {
    auto* auth = e.key == Value("auth") ? std::get_if<Map>(&e.value.v) : nullptr;
    if (auth == nullptr) continue;
    for (MapEntry& a : *auth) {
      if (a.key == Value("pass")) a.value = Value("***");
    }
  }
}

}  // namespace

std::string op_label(std::uint8_t code) {
  const OpInfo* info = find_op(code);
  if (info != nullptr) return std::string(info->name);
  return "op " + std::to_string(code);
}

std::string header_text(ByteView header) {
  if (header.empty()) return "{}";
  auto value = decode_value(header);
  if (!value) return "(not MessagePack: " + to_hex(header.first(std::min<std::size_t>(header.size(), 64))) + ")";
  redact_password(*value);
  return typed_json_from_value(*value).dump();
}

std::string header_summary(ByteView header) {
  if (header.size() > kSummaryBytes) return "(" + std::to_string(header.size()) + "-byte header)";
  return header_text(header);
}

std::string preview(ByteView bytes) {
  std::string out;
  for (std::size_t i = 0; i < std::min(bytes.size(), kPreviewBytes); ++i) {
    const auto c = static_cast<char>(bytes[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += c;
    } else {
      out += "\\x" + to_hex(bytes.subspan(i, 1));
    }
  }
  if (bytes.size() > kPreviewBytes) out += "...";
  return out;
}

}  // namespace firemq::conform
