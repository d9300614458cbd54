#include <gtest/gtest.h>

#include <set>

#include "protocol/ops.h"
#include "protocol/reply_codes.h"

namespace firemq {
namespace {

TEST(OpTable, HasTheSpecsTwentySevenOpsWithUniqueCodesAndNames) {
  std::set<std::uint8_t> codes;
  std::set<std::string_view> names;
  for (const OpInfo& op : kOps) {
    codes.insert(static_cast<std::uint8_t>(op.code));
    names.insert(op.name);
  }
  EXPECT_EQ(codes.size(), 27u);
  EXPECT_EQ(names.size(), 27u);
}

TEST(OpTable, OnlyPublishReturnDeliverAndGetOkCarryAPayload) {
  std::set<std::string_view> with_payload;
  for (const OpInfo& op : kOps) {
    if (op.has_payload) with_payload.insert(op.name);
  }
  EXPECT_EQ(with_payload, (std::set<std::string_view>{"publish", "return", "deliver", "get_ok"}));
}

TEST(OpTable, FindsByCodeAndRefusesUndefinedCodes) {
  EXPECT_EQ(find_op(0x22)->name, "return");
  EXPECT_EQ(find_op(0x39), nullptr);  // reserved for commit_offset in a later version
  EXPECT_EQ(find_op(0x00), nullptr);
}

TEST(ReplyCodes, SpecFixedFatalityIsKept) {
  EXPECT_TRUE(find_reply_code(501)->fatal);
  EXPECT_FALSE(find_reply_code(540)->fatal);
  EXPECT_FALSE(find_reply_code(406)->fatal);
  EXPECT_EQ(find_reply_code(999), nullptr);
}

TEST(ReplyCodes, MakeErrorTakesFatalityFromTheTable) {
  EXPECT_EQ(make_error(ReplyCode::frame_error, "x"), (Error{501, "x", true, 0}));
  EXPECT_EQ(make_error(ReplyCode::not_found, "y", 3), (Error{404, "y", false, 3}));
}

}  // namespace
}  // namespace firemq
