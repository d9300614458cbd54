// The few judgements on a RunResult that every report shares: counts by verdict, whether the run passes,
// which requirements no case covers, and the verdicts' names. Kept here so all reports agree.
#include "harness/model/run_result.h"

#include <unordered_set>

namespace firemq::conform {
namespace {

constexpr Verdict kAllVerdicts[] = {Verdict::pass,  Verdict::fail,          Verdict::skipped,
                                    Verdict::error, Verdict::expected_fail, Verdict::unexpected_pass};

// A case "executed" when the broker was actually put to the test, whatever came of it.
bool executed(Verdict v) {
  return v == Verdict::pass || v == Verdict::fail || v == Verdict::expected_fail || v == Verdict::unexpected_pass;
}

// What fails a run: the broker got something wrong, the harness could not judge, or the known-failures
// list is out of date.
bool fails_run(Verdict v) { return v == Verdict::fail || v == Verdict::error || v == Verdict::unexpected_pass; }

}  // namespace

std::map<Verdict, int> RunResult::counts() const {
  // Every verdict is present, so readers can use at() and print zeros.
  std::map<Verdict, int> result;
  for (Verdict v : kAllVerdicts) result[v] = 0;
  for (const CaseResult& c : cases) ++result[c.verdict];
  return result;
}

bool RunResult::passed() const {
  bool any_executed = false;
  for (const CaseResult& c : cases) {
    if (fails_run(c.verdict)) return false;
    any_executed = any_executed || executed(c.verdict);
  }
  // A run where everything was skipped proved nothing, so it must not turn CI green.
  return any_executed;
}

std::vector<std::string> RunResult::uncovered_requirements() const {
  // Covered means some case in this run lists it, whatever its verdict.
  std::unordered_set<std::string> covered;
  for (const CaseResult& c : cases) covered.insert(c.requirements.begin(), c.requirements.end());
  if (!cases.empty()) covered.insert(monitor_rules.begin(), monitor_rules.end());
  std::vector<std::string> result;
  for (const Requirement& r : requirements) {
    if (!covered.contains(r.id)) result.push_back(r.id);
  }
  return result;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::fail: return "fail";
    case Verdict::skipped: return "skipped";
    case Verdict::error: return "error";
    case Verdict::expected_fail: return "expected-fail";
    case Verdict::unexpected_pass: return "unexpected-pass";
  }
  return "unknown";  // only reachable through a cast of a bad integer
}

}  // namespace firemq::conform
