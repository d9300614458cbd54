// The suite's requirement coverage, as a whole rather than per run: which requirement of the catalog some
// broker case, client case or wire-monitor rule checks, and which none does. `firemq-conform --coverage`
// prints it, and CI fails when a requirement is unchecked without the catalog saying why ("untested_because",
// with the full reason in docs/spec-notes.md), or when a reason stays on a requirement that is now checked.
#pragma once

#include <string>
#include <vector>

#include "harness/model/case_model.h"

namespace firemq::conform {

struct RequirementCheckers {
  const Requirement* requirement = nullptr;
  std::vector<std::string> broker_cases;  // ids of broker cases that list it
  std::vector<std::string> client_cases;  // ids of client cases that list it
  bool broker_monitor = false;            // the monitor checks it on every broker frame
  bool client_monitor = false;            // the monitor checks it on every client frame

  bool checked() const { return !broker_cases.empty() || !client_cases.empty() || broker_monitor || client_monitor; }
};

struct SuiteCoverage {
  std::vector<RequirementCheckers> requirements;  // in catalog order

  // Unchecked with no reason in the catalog: each one is a hole in the suite.
  std::vector<const Requirement*> unexplained() const;
  // A reason for not checking a requirement that some case or rule now checks: the catalog is out of date.
  std::vector<const Requirement*> stale_reasons() const;
};

SuiteCoverage suite_coverage(const std::vector<Requirement>& catalog, const std::vector<CaseSpec>& broker_cases,
                             const std::vector<CaseSpec>& client_cases,
                             const std::vector<std::string>& broker_monitor_rules,
                             const std::vector<std::string>& client_monitor_rules);

// The text `firemq-conform --coverage` prints: totals, then every unchecked requirement with its reason.
std::string coverage_text(const SuiteCoverage& coverage);

}  // namespace firemq::conform
