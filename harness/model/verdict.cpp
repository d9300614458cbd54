#include "harness/model/verdict.h"

#include <algorithm>

namespace firemq::conform {

std::string monitor_failure_message(const MonitorViolation& v) {
  return "wire monitor: " + v.rule + ": " + v.message + " (\"" + v.spec.quote + "\")";
}

CaseVerdict decide_verdict(const std::vector<StepRecord>& records, const std::vector<MonitorViolation>& violations) {
  const auto earliest = std::min_element(violations.begin(), violations.end(),
                                         [](const auto& a, const auto& b) { return a.at_ms < b.at_ms; });
  const MonitorViolation* first = earliest == violations.end() ? nullptr : &*earliest;
  for (const StepRecord& r : records) {
    if (first != nullptr && first->at_ms <= r.ended_ms) {
      std::string message = monitor_failure_message(*first);
      if (!r.outcome.is_ok()) message += "; the step itself: " + r.outcome.message;
      return {Verdict::fail, std::move(message), r.step, first};
    }
    if (!r.outcome.is_ok()) {
      return {r.outcome.kind == StepOutcome::Kind::fail ? Verdict::fail : Verdict::error, r.outcome.message, r.step};
    }
  }
  if (first != nullptr) return {Verdict::fail, monitor_failure_message(*first), -1, first};
  return {};
}

void record_verdict(const CaseVerdict& verdict, const nlohmann::json& steps, CaseResult& result) {
  result.verdict = verdict.verdict;
  result.message = verdict.message;
  if (verdict.failed_step >= 0) {
    result.failed_step = verdict.failed_step;
    result.failed_step_text = steps.at(static_cast<std::size_t>(verdict.failed_step)).dump();
  }
}

}  // namespace firemq::conform
