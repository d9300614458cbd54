// Broker mode: the broker cases against the reference broker, started here on free ports, or against a --url
// target; with --fault through the fault proxy, with --fault-check once per fault of a file (broker_mode.cpp).
#pragma once

#include <string>
#include <vector>

#include "harness/cli/cli_common.h"

namespace firemq::conform::cli {

// The exit status: kExitPassed, kExitFailed, or kExitUsage (printed why).
int run_broker_mode(const Options& o, const Suite& suite, const std::vector<const CaseSpec*>& selected,
                    const std::vector<std::string>& known, bool transport_given, const std::string& command_line);

}  // namespace firemq::conform::cli
