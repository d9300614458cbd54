// The suite's requirement coverage across broker cases, client cases and the wire monitor's rules.
#include "harness/model/suite_coverage.h"

#include <algorithm>
#include <map>

namespace firemq::conform {
namespace {

bool contains(const std::vector<std::string>& ids, const std::string& id) {
  return std::ranges::find(ids, id) != ids.end();
}

// Which cases list each requirement id.
std::map<std::string, std::vector<std::string>> cases_by_requirement(const std::vector<CaseSpec>& cases) {
  std::map<std::string, std::vector<std::string>> out;
  for (const CaseSpec& c : cases) {
    for (const std::string& r : c.requirements) out[r].push_back(c.id);
  }
  return out;
}

std::vector<std::string> listed(const std::map<std::string, std::vector<std::string>>& by_requirement,
                                const std::string& id) {
  const auto it = by_requirement.find(id);
  return it == by_requirement.end() ? std::vector<std::string>{} : it->second;
}

std::string line_of(const Requirement& r) { return "  " + r.id + " (" + r.level + ", " + r.section + ")\n"; }

}  // namespace

std::vector<const Requirement*> SuiteCoverage::unexplained() const {
  std::vector<const Requirement*> out;
  for (const RequirementCheckers& r : requirements) {
    if (!r.checked() && r.requirement->untested_because.empty()) out.push_back(r.requirement);
  }
  return out;
}

std::vector<const Requirement*> SuiteCoverage::stale_reasons() const {
  std::vector<const Requirement*> out;
  for (const RequirementCheckers& r : requirements) {
    if (r.checked() && !r.requirement->untested_because.empty()) out.push_back(r.requirement);
  }
  return out;
}

SuiteCoverage suite_coverage(const std::vector<Requirement>& catalog, const std::vector<CaseSpec>& broker_cases,
                             const std::vector<CaseSpec>& client_cases,
                             const std::vector<std::string>& broker_monitor_rules,
                             const std::vector<std::string>& client_monitor_rules) {
  const auto by_broker_case = cases_by_requirement(broker_cases);
  const auto by_client_case = cases_by_requirement(client_cases);
  SuiteCoverage out;
  for (const Requirement& r : catalog) {
    out.requirements.push_back({&r, listed(by_broker_case, r.id), listed(by_client_case, r.id),
                                contains(broker_monitor_rules, r.id), contains(client_monitor_rules, r.id)});
  }
  return out;
}

std::string coverage_text(const SuiteCoverage& coverage) {
  std::size_t by_broker_cases = 0, by_client_cases = 0, by_monitor_only = 0, checked = 0;
  std::string explained;
  for (const RequirementCheckers& r : coverage.requirements) {
    by_broker_cases += r.broker_cases.empty() ? 0 : 1;
    by_client_cases += r.client_cases.empty() ? 0 : 1;
    by_monitor_only += (r.broker_cases.empty() && r.client_cases.empty() && r.checked()) ? 1 : 0;
    checked += r.checked() ? 1 : 0;
    if (!r.checked() && !r.requirement->untested_because.empty()) {
      explained += line_of(*r.requirement) + "    " + r.requirement->untested_because + "\n";
    }
  }
  std::string s = std::to_string(coverage.requirements.size()) + " requirements: " + std::to_string(checked) +
                  " checked (" + std::to_string(by_broker_cases) + " by broker cases, " +
                  std::to_string(by_client_cases) + " by client cases, " + std::to_string(by_monitor_only) +
                  " by the wire monitor alone)\n";
  if (!explained.empty())
    s += "\nUnchecked, with the reason (docs/spec-notes.md, \"Requirements no case checks\"):\n" + explained;
  const auto unexplained = coverage.unexplained();
  if (!unexplained.empty()) {
    s += "\nUnchecked and unexplained: write a case, or say why none can be written (\"untested_because\" in "
         "requirements.json, and docs/spec-notes.md):\n";
    for (const Requirement* r : unexplained) s += line_of(*r);
  }
  const auto stale = coverage.stale_reasons();
  if (!stale.empty()) {
    s += "\nChecked, yet the catalog says why they are not (remove \"untested_because\"):\n";
    for (const Requirement* r : stale) s += line_of(*r);
  }
  return s;
}

}  // namespace firemq::conform
