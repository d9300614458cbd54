// Selecting cases, running them in parallel against a target, and turning outcomes into verdicts.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/client/target.h"
#include "harness/model/case_model.h"
#include "harness/model/run_result.h"
#include "harness/process/embedded_broker.h"
#include "harness/run/scenario.h"

namespace firemq::conform {

struct Selection {
  std::vector<std::string> id_globs;  // any matches; none given: every case
  std::set<std::string> groups;
  std::set<std::string> tags;
  std::set<std::string> levels;
};

std::vector<const CaseSpec*> select_cases(const std::vector<CaseSpec>& cases, const Selection& selection);

// Known failures: one case id (or glob) a line, "#" starts a comment. A listed case that fails is
// expected-fail; one that passes is unexpected-pass, which fails the run, so the list stays true.
Result<std::vector<std::string>, std::string> load_known_failures(const std::string& file);
// Turns a listed case's fail into expected_fail and its pass into unexpected_pass (client mode uses it too).
void apply_known_failures(CaseResult& r, const std::vector<std::string>& known);

// What the runner learned from a first handshake with the target.
struct ServerInfo {
  std::string name;
  std::string version;
  std::vector<std::string> caps;
};
Result<ServerInfo, std::string> probe_server(const Target& target);

// How the harness restarts a --url target (--restart-command): `command` runs under /bin/sh -c, with
// FIREMQ_RESTART_KILL=1 in its environment when the case asks for kill -9; then the harness waits until
// host:port (the broker itself, not a fault proxy in front of it) accepts TCP connections again.
struct RestartCommand {
  std::string command;
  std::string host;
  std::uint16_t port = 0;
};

// Restarts the target with `how.command`, bounded by `deadline` (the case's); `signalled` runs while the
// command works, for a graceful restart (the case's connections answer the broker's close).
StepOutcome restart_with_command(const RestartCommand& how, bool kill, Clock::time_point deadline,
                                 const std::function<void()>& signalled);

// How the harness has a --url target raise or clear a resource alarm (--alarm-command): `command` runs under
// /bin/sh -c with FIREMQ_ALARM=raise or FIREMQ_ALARM=clear in its environment, and returns once the broker has
// raised or cleared it (the case then expects the flow frames that follow).
StepOutcome alarm_with_command(const std::string& command, bool raise, Clock::time_point deadline);
// Whether the case raises an alarm (requires the feature "alarm"); against a --url target it runs alone, as a
// restart does.
bool raises_alarm(const CaseSpec& spec);

// Whether the case restarts its broker (requires the feature "restart"). Such a case runs alone: on a broker
// of its own when the harness starts the broker, or against a --url target after every other case, one at a
// time, so that a restart never disturbs a case running beside it.
bool restarts_broker(const CaseSpec& spec);

struct RunOptions {
  int jobs = 2;
  std::vector<std::string> known_failures;
  std::string run_id;
  // Starts a reference broker with extra flags, for cases with broker_args; empty when the target is a --url
  // (such cases are then skipped).
  std::function<Result<std::unique_ptr<EmbeddedBroker>, std::string>(const std::vector<std::string>&)> start_broker;
  // Against a --url target: how to restart it (--restart-command), for cases that require "restart".
  std::optional<RestartCommand> restart_command;
  // Against a --url target: how to raise and clear an alarm on it (--alarm-command), for cases that require
  // "alarm".
  std::optional<std::string> alarm_command;
  // With --fault, puts the fault proxy in front of a case's own broker too: may change the target's port, and
  // returns what keeps the proxy alive for the case.
  std::function<std::shared_ptr<void>(Target&)> through;
  // Called after each case, from the worker thread that ran it, under a lock.
  std::function<void(const CaseResult&, std::size_t done, std::size_t total)> on_case_done;
};

std::vector<CaseResult> run_cases(const std::vector<const CaseSpec*>& cases, const Target& target,
                                  const ServerInfo& server, const RunOptions& options);

}  // namespace firemq::conform
