#include "protocol/reply_codes.h"

namespace firemq {

const ReplyCodeInfo* find_reply_code(std::uint16_t code) {
  for (const ReplyCodeInfo& info : kReplyCodes) {
    if (static_cast<std::uint16_t>(info.code) == code) return &info;
  }
  return nullptr;
}

Error make_error(ReplyCode code, std::string msg, std::uint64_t rid) {
  const auto numeric = static_cast<std::uint16_t>(code);
  return Error{numeric, std::move(msg), find_reply_code(numeric)->fatal, rid};
}

}  // namespace firemq
