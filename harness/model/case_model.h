// Conformance cases as data: the case files under conformance/cases/ (one per spec section) and the
// requirement catalog conformance/requirements.json. docs/case-format.md documents both for case authors.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "harness/model/run_result.h"
#include "harness/model/transport.h"
#include "protocol/error.h"

namespace firemq::conform {

struct CaseSpec {
  std::string id;  // stable: reports, known-failures files and CI history refer to it
  std::string title;
  std::string group;  // the case file's group, e.g. "lifecycle"
  std::string level;  // MUST, SHOULD or MAY
  SpecRef spec;
  std::vector<std::string> requirements;
  std::vector<std::string> tags;
  std::vector<std::string> required_caps;      // welcome.caps the target must list, else skipped
  std::vector<std::string> required_features;  // target features (--features), else skipped
  int timeout_ms = 10'000;
  // Flags for a broker of the case's own: the embedded reference broker is started with them for this case
  // alone (flow control needs a small watermark). Against a --url target such a case is skipped.
  std::vector<std::string> broker_args;
  bool own_broker = false;  // "broker_args" is present, even empty
  // The transports the case means something on ("transports"; default all four): a case about the TCP
  // framing's bytes (the preamble, len arithmetic) is stream-only, one about WebSocket messages is ws-only.
  // Over another transport it is skipped.
  std::set<Transport> transports{kAllTransports.begin(), kAllTransports.end()};
  // The case opens FireMQ connections: a step other than amqp_* and sleep. Only the cases that do not (the
  // AMQP-only ones) run against a target that speaks AMQP 0-9-1 alone (--url amqp://).
  bool speaks_fire = true;
  nlohmann::json steps;  // validated by load_cases: every step is one known verb with an object
  std::string file;      // where the case is defined, for error messages
};

// A result for `spec` with the case's facts filled in and no verdict yet (pass).
CaseResult result_for(const CaseSpec& spec);

// The verbs a step may use (scenario.cpp implements them).
const std::vector<std::string>& step_verbs();

// Loads every *.json under `dir`, in name order; the error names the file, the case and what is wrong.
// Checks: ids unique and well-formed, levels known, every requirement id in `catalog`, steps well-formed and
// each one of `verbs` (broker cases: step_verbs(); client cases: client_step_verbs() of client_mode.h).
Result<std::vector<CaseSpec>, std::string> load_cases(const std::filesystem::path& dir,
                                                      const std::vector<Requirement>& catalog,
                                                      const std::vector<std::string>& verbs = step_verbs());
Result<std::vector<Requirement>, std::string> load_requirements(const std::filesystem::path& file);

// Shell-style glob over case ids: * matches any run of characters, ? one character.
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace firemq::conform
