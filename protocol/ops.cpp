#include "protocol/ops.h"

namespace firemq {

const OpInfo* find_op(std::uint8_t code) {
  for (const OpInfo& info : kOps) {
    if (static_cast<std::uint8_t>(info.code) == code) return &info;
  }
  return nullptr;
}

std::string_view op_name(OpCode op) {
  return find_op(static_cast<std::uint8_t>(op))->name;
}

}  // namespace firemq
