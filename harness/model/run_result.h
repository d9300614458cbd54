// What a conformance run produced: the data every report writer reads (JSON, JUnit XML, HTML, Markdown).
// Plain data, filled by the runner; the writers never run anything.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace firemq::conform {

// The verdict of one case.
//   pass            the broker did what the case requires
//   fail            it did not
//   skipped         the case declares a capability or feature the target does not have (never inferred)
//   error           the harness could not run the case (could not connect, a malformed case, a timeout of
//                   the harness itself); not a verdict on the broker
//   expected_fail   failed, and listed in the known-failures file
//   unexpected_pass passed, but listed in the known-failures file: fails the run, so the list is kept true
enum class Verdict { pass, fail, skipped, error, expected_fail, unexpected_pass };

// One line of a case's transcript: what was sent or received, or what the harness did.
struct TranscriptLine {
  double at_ms = 0;         // since the case started
  std::string connection;   // the case's name for the connection ("main", "second", ...)
  std::string direction;    // "sent", "received", "note"
  std::string op;           // op name, "" for raw bytes and notes
  std::string header_json;  // the header in typed JSON (vectors/README.md), or the note's text
  std::size_t payload_size = 0;
  std::string payload_preview;  // at most 64 bytes, printable ASCII kept, others as \xNN
};

// The spec sentence a case checks.
struct SpecRef {
  std::string section;  // e.g. "Connection lifecycle / hello"
  std::string quote;    // the sentence, verbatim from the spec
};

// A connection-wide rule of the spec broken on the wire, as the wire monitor saw it (wire_monitor.h).
struct MonitorViolation {
  std::string rule;                     // its requirement id, e.g. "credit.limit"
  SpecRef spec;                         // the spec sentence the rule checks
  std::string connection;               // the case's name for the connection
  double at_ms = 0;                     // since the case started
  std::string message;                  // what happened
  std::vector<TranscriptLine> context;  // the frames around it, both ways, the offending one included
};

struct CaseResult {
  std::string id;  // stable, e.g. "lifecycle.hello.bad-credentials"
  std::string title;
  std::string group;  // the case file's group, e.g. "lifecycle"
  std::string level;  // "MUST", "SHOULD" or "MAY"
  SpecRef spec;
  std::vector<std::string> requirements;  // requirement ids covered
  std::vector<std::string> tags;
  Verdict verdict = Verdict::pass;
  std::string message;           // why it failed, errored or was skipped; empty on pass
  int failed_step = -1;          // index of the step that failed, -1 when none
  std::string failed_step_text;  // that step as JSON
  double duration_ms = 0;
  std::vector<TranscriptLine> transcript;
  std::string transport;  // the transport the case ran over: "fire", "fires", "ws" or "wss"
  // What the wire monitor found, in order; any fails the case (its message names the first).
  std::vector<MonitorViolation> violations;
};

struct Requirement {
  std::string id;
  std::string section;
  std::string level;
  std::string text;
  // Why no case checks it, when none can (the catalog's "untested_because"; docs/spec-notes.md has the
  // full reasoning under "Requirements no case checks"). Empty for a requirement the suite checks.
  std::string untested_because = {};
  // Whose duty it is: "server", "client" or "both" (the catalog's "applies_to"). A run's coverage counts only
  // the requirements that bind what it judges: a broker run leaves out the client's, a client run the server's.
  std::string applies_to = "both";
};

// The catalog's requirements that bind the side a run judges ("server" or "client").
std::vector<Requirement> binding(const std::vector<Requirement>& catalog, const std::string& judged);

struct RunResult {
  std::string run_id;      // e.g. "20261130T071903Z-4821", also the report folder's name
  std::string started_at;  // ISO 8601 UTC
  double duration_ms = 0;
  std::string target;  // the URL tested, or "embedded reference broker (fire://127.0.0.1:PORT)"
  std::string harness_version;
  std::string server_name;  // from welcome.server, when a connection got that far
  std::string server_version;
  std::vector<std::string> server_caps;
  std::string command_line;
  std::vector<CaseResult> cases;          // in the order of the case files
  std::vector<Requirement> requirements;  // the whole catalog
  // Requirement ids the wire monitor checked on every connection of every case: covered once a case ran.
  std::vector<std::string> monitor_rules;

  // Counts by verdict, and whether the run as a whole passes: nothing unexpected happened (no fail, error
  // or unexpected_pass) and at least one case ran.
  std::map<Verdict, int> counts() const;
  bool passed() const;
  // Requirement ids no case covers (and the monitor does not check), in catalog order.
  std::vector<std::string> uncovered_requirements() const;
};

const char* verdict_name(Verdict v);  // "pass", "fail", "skipped", "error", "expected-fail", "unexpected-pass"

}  // namespace firemq::conform
