// What the broker logs of a peer's bytes: bounded and escaped.
#include "reference-broker/core/log.h"

#include <gtest/gtest.h>

namespace firemq {
namespace {

TEST(Printable, KeepsPrintableTextAsItIs) { EXPECT_EQ(printable("guest 'on' /"), "guest 'on' /"); }

TEST(Printable, EscapesWhatCouldForgeALineOrDriveATerminal) {
  EXPECT_EQ(printable("a\nfiremq-broker: fake"), "a\\x0afiremq-broker: fake");
  EXPECT_EQ(printable("\x1b[31mred\\"), "\\x1b[31mred\\x5c");
  EXPECT_EQ(printable(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(printable("\xc3\xa9"), "\\xc3\\xa9");  // UTF-8 too: the log stays ASCII
}

TEST(Printable, BoundsTheLength) {
  EXPECT_EQ(printable(std::string(1000, 'x'), 8), "xxxxxxxx...");
  EXPECT_EQ(printable("short", 8), "short");
}

}  // namespace
}  // namespace firemq
