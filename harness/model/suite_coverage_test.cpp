// The suite's coverage: which requirement a case or monitor rule checks, and when the catalog's reasons for
// an unchecked requirement are missing or out of date.
#include "harness/model/suite_coverage.h"

#include <gtest/gtest.h>

namespace firemq::conform {
namespace {

CaseSpec case_listing(std::string id, std::vector<std::string> requirements) {
  CaseSpec c;
  c.id = std::move(id);
  c.requirements = std::move(requirements);
  return c;
}

std::vector<std::string> ids(const std::vector<const Requirement*>& requirements) {
  std::vector<std::string> out;
  for (const Requirement* r : requirements) out.push_back(r->id);
  return out;
}

const std::vector<Requirement> kCatalog = {
    {"R-broker", "s", "MUST", "checked by a broker case", ""},
    {"R-client", "s", "MUST", "checked by a client case", ""},
    {"R-monitor", "s", "MUST", "checked by the monitor on clients", ""},
    {"R-explained", "s", "MUST", "nobody can check it", "no test can provoke it"},
    {"R-hole", "s", "MUST", "nobody checks it", ""},
};

TEST(SuiteCoverage, CountsBrokerCasesClientCasesAndMonitorRules) {
  const SuiteCoverage cov = suite_coverage(kCatalog, {case_listing("b.one", {"R-broker"})},
                                           {case_listing("c.one", {"R-client"})}, {}, {"R-monitor"});
  ASSERT_EQ(cov.requirements.size(), 5u);
  EXPECT_EQ(cov.requirements[0].broker_cases, std::vector<std::string>{"b.one"});
  EXPECT_EQ(cov.requirements[1].client_cases, std::vector<std::string>{"c.one"});
  EXPECT_TRUE(cov.requirements[2].client_monitor);
  EXPECT_FALSE(cov.requirements[3].checked());
  EXPECT_EQ(ids(cov.unexplained()), std::vector<std::string>{"R-hole"});
  EXPECT_TRUE(cov.stale_reasons().empty());
  const std::string text = coverage_text(cov);
  EXPECT_NE(text.find("5 requirements: 3 checked (1 by broker cases, 1 by client cases, 1 by the wire monitor alone)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("R-explained (MUST, s)\n    no test can provoke it"), std::string::npos) << text;
  EXPECT_NE(text.find("Unchecked and unexplained"), std::string::npos) << text;
}

TEST(SuiteCoverage, AReasonOnACheckedRequirementIsStale) {
  const SuiteCoverage cov = suite_coverage(kCatalog, {case_listing("b.one", {"R-explained", "R-hole"})}, {}, {}, {});
  EXPECT_EQ(ids(cov.stale_reasons()), std::vector<std::string>{"R-explained"});
  EXPECT_EQ(ids(cov.unexplained()), (std::vector<std::string>{"R-broker", "R-client", "R-monitor"}));
  EXPECT_NE(coverage_text(cov).find("remove \"untested_because\""), std::string::npos);
}

TEST(RunCoverage, BrokerRunCountsTheServersAndBothsDutiesAndClientRunTheClientsAndBoths) {
  const std::vector<Requirement> catalog = {
      {"s", "", "MUST", "", "", "server"}, {"c", "", "MUST", "", "", "client"}, {"b", "", "MUST", "", "", "both"}};
  const auto names = [](const std::vector<Requirement>& rs) {
    std::vector<std::string> out;
    for (const Requirement& r : rs) out.push_back(r.id);
    return out;
  };
  EXPECT_EQ(names(binding(catalog, "server")), (std::vector<std::string>{"s", "b"}));
  EXPECT_EQ(names(binding(catalog, "client")), (std::vector<std::string>{"c", "b"}));
}

}  // namespace
}  // namespace firemq::conform
