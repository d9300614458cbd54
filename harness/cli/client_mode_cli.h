// Client mode (--driver): the client cases, each with the client's driver against the reference broker behind the
// harness's client proxy, once per transport (client_mode_cli.cpp; the mode itself is harness/client_mode/).
#pragma once

#include <string>
#include <vector>

#include "harness/cli/cli_common.h"

namespace firemq::conform::cli {

// The exit status: kExitPassed, kExitFailed, or kExitUsage (printed why).
int run_client_mode_cli(const Options& o, const Suite& suite, const std::vector<const CaseSpec*>& selected,
                        const std::vector<std::string>& known, bool transport_given, const std::string& command_line);

}  // namespace firemq::conform::cli
