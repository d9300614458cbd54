// How a case's verdict follows from what its steps concluded and what the wire monitor saw: one rule for both
// modes of the harness (broker mode, run/scenario.h; client mode, client_mode/client_mode.h), so that a case
// fails with the same words, at the same step, whichever side of the wire is judged.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "harness/model/run_result.h"

namespace firemq::conform {

// How a step ended: ok; fail (the peer under test did not do what the case requires); error (the harness could
// not carry out the step: a malformed step, or the target could not be reached).
struct StepOutcome {
  enum class Kind { ok, fail, error };
  Kind kind = Kind::ok;
  std::string message;

  static StepOutcome ok() { return {}; }
  static StepOutcome fail(std::string m) { return {Kind::fail, std::move(m)}; }
  static StepOutcome error(std::string m) { return {Kind::error, std::move(m)}; }
  bool is_ok() const { return kind == Kind::ok; }
};

// A step as the verdict sees it: its outcome and when it ended (ms since the case started, the clock of the
// monitor's violations). `step` is its index in the case's steps; -1 for a check the mode makes after them
// (client mode: the driver's unexpected errors, its exit).
struct StepRecord {
  int step = -1;
  StepOutcome outcome;
  double ended_ms = 0;
};

struct CaseVerdict {
  Verdict verdict = Verdict::pass;
  std::string message;   // empty on pass
  int failed_step = -1;  // the index of the step it failed at, -1 when none (or after the last one)
  const MonitorViolation* violation = nullptr;  // the violation it failed for, if any (points into the input)
};

// The first thing that went wrong decides: a step that did not end ok, or a connection-wide rule the monitor
// saw broken (the earliest violation), which fails the case at the step during which it happened, whatever the
// step itself concluded (its own message is kept after it). A violation after the last step fails the case too,
// at no step. `records` are in the order the steps ran; `violations` in any order.
CaseVerdict decide_verdict(const std::vector<StepRecord>& records, const std::vector<MonitorViolation>& violations);

// Writes `verdict` into `result`: its verdict, message and failed step (with the step's text from `steps`, the
// case's steps as JSON).
void record_verdict(const CaseVerdict& verdict, const nlohmann::json& steps, CaseResult& result);

// The words for a broken rule, the same in both modes: "wire monitor: <rule>: <what happened> ("<spec>")".
std::string monitor_failure_message(const MonitorViolation& v);

}  // namespace firemq::conform
