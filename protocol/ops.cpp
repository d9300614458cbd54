#include "protocol/ops.h"

namespace firemq {

const OpInfo* find_op(std::uint8_t code) {
  // Looked up for every frame: a table by code, made once from kOps.
  static const std::array<const OpInfo*, 256> by_code = [] {
    std::array<const OpInfo*, 256> table{};
    for (const OpInfo& info : kOps) table[static_cast<std::uint8_t>(info.code)] = &info;
    return table;
  }();
  return by_code[code];
}

std::string_view op_name(OpCode op) { return find_op(static_cast<std::uint8_t>(op))->name; }

}  // namespace firemq
