#include "harness/model/verdict.h"

#include <gtest/gtest.h>

namespace firemq::conform {
namespace {

MonitorViolation violation_at(double at_ms) {
  MonitorViolation v;
  v.rule = "credit.limit";
  v.spec.quote = "The server never sends more deliveries than the credit.";
  v.connection = "main";
  v.at_ms = at_ms;
  v.message = "a deliver past the credit";
  return v;
}

TEST(DecideVerdict, PassesWhenEveryStepIsOkAndTheMonitorSawNothing) {
  const CaseVerdict v = decide_verdict({{0, StepOutcome::ok(), 10}, {1, StepOutcome::ok(), 20}}, {});
  EXPECT_EQ(v.verdict, Verdict::pass);
  EXPECT_EQ(v.message, "");
  EXPECT_EQ(v.failed_step, -1);
}

TEST(DecideVerdict, TheFirstStepThatDidNotEndOkDecides) {
  const CaseVerdict failed = decide_verdict({{0, StepOutcome::ok(), 10}, {1, StepOutcome::fail("expected ok"), 20}},
                                            {});
  EXPECT_EQ(failed.verdict, Verdict::fail);
  EXPECT_EQ(failed.message, "expected ok");
  EXPECT_EQ(failed.failed_step, 1);
  const CaseVerdict errored = decide_verdict({{0, StepOutcome::error("cannot connect"), 10}}, {});
  EXPECT_EQ(errored.verdict, Verdict::error);
  EXPECT_EQ(errored.failed_step, 0);
}

TEST(DecideVerdict, AViolationFailsTheStepDuringWhichItHappenedWhateverLaterStepsSay) {
  const std::vector<MonitorViolation> violations = {violation_at(30), violation_at(15)};
  const CaseVerdict v = decide_verdict(
      {{0, StepOutcome::ok(), 10}, {1, StepOutcome::ok(), 20}, {2, StepOutcome::fail("later"), 40}}, violations);
  EXPECT_EQ(v.verdict, Verdict::fail);
  EXPECT_EQ(v.failed_step, 1) << "the earliest violation, at 15 ms, happened during step 1";
  EXPECT_EQ(v.message, "wire monitor: credit.limit: a deliver past the credit (\"The server never sends more "
                       "deliveries than the credit.\")");
  ASSERT_NE(v.violation, nullptr);
  EXPECT_EQ(v.violation->at_ms, 15);
}

TEST(DecideVerdict, TheStepsOwnFailureIsKeptAfterTheViolation) {
  const CaseVerdict v = decide_verdict({{0, StepOutcome::error("timed out"), 10}}, {violation_at(5)});
  EXPECT_EQ(v.verdict, Verdict::fail);
  EXPECT_EQ(v.failed_step, 0);
  EXPECT_EQ(v.message, monitor_failure_message(violation_at(5)) + "; the step itself: timed out");
}

TEST(DecideVerdict, AViolationAfterTheLastStepFailsTheCaseAtNoStep) {
  const CaseVerdict v = decide_verdict({{0, StepOutcome::ok(), 10}, {-1, StepOutcome::ok(), 12}}, {violation_at(50)});
  EXPECT_EQ(v.verdict, Verdict::fail);
  EXPECT_EQ(v.failed_step, -1);
  EXPECT_EQ(v.message, monitor_failure_message(violation_at(50)));
  EXPECT_EQ(decide_verdict({}, {violation_at(1)}).verdict, Verdict::fail) << "a case with no step record";
}

}  // namespace
}  // namespace firemq::conform
