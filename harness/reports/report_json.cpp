// report.json (reports.h): the run for machines, in a stable shape ("format": "firemq-conform-report",
// "version": 1). Every peer string is cleaned of invalid UTF-8 first (report_common.h).
#include "harness/reports/reports.h"

#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "harness/reports/report_common.h"

namespace firemq::conform {
namespace {

using namespace report;  // the writers' shared helpers

constexpr int kMaxHeaderNesting = 64;  // nlohmann's serializer recurses

using Json = nlohmann::ordered_json;  // keeps the documented key order

// Conservative: counts brackets outside strings, so a header too deep to serialize safely stays text.
bool nesting_within(std::string_view s, int limit) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

// A note's header_json is free text, kept as a string even when it happens to parse (e.g. "42").
Json header_value(const TranscriptLine& line) {
  if (line.direction != "note" && nesting_within(line.header_json, kMaxHeaderNesting)) {
    Json parsed = Json::parse(line.header_json, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) return parsed;
  }
  return clean(line.header_json, Clean::utf8);
}

Json strings_json(const std::vector<std::string>& items) {
  Json out = Json::array();
  for (const std::string& item : items) out.push_back(clean(item, Clean::utf8));
  return out;
}

Json transcript_json(const std::vector<TranscriptLine>& transcript) {
  Json out = Json::array();
  for (const TranscriptLine& line : transcript) {
    Json j;
    j["at_ms"] = line.at_ms;
    j["connection"] = clean(line.connection, Clean::utf8);
    j["direction"] = clean(line.direction, Clean::utf8);
    j["op"] = clean(line.op, Clean::utf8);
    j["header"] = header_value(line);
    j["payload_size"] = line.payload_size;
    j["payload_preview"] = clean(line.payload_preview, Clean::utf8);
    out.push_back(std::move(j));
  }
  return out;
}

Json violations_json(const std::vector<MonitorViolation>& violations) {
  Json out = Json::array();
  for (const MonitorViolation& v : violations) {
    Json j;
    j["rule"] = clean(v.rule, Clean::utf8);
    j["spec"]["section"] = clean(v.spec.section, Clean::utf8);
    j["spec"]["quote"] = clean(v.spec.quote, Clean::utf8);
    j["connection"] = clean(v.connection, Clean::utf8);
    j["at_ms"] = v.at_ms;
    j["message"] = clean(v.message, Clean::utf8);
    j["context"] = transcript_json(v.context);
    out.push_back(std::move(j));
  }
  return out;
}

Json case_json(const CaseResult& c) {
  Json j;
  j["id"] = clean(c.id, Clean::utf8);
  j["title"] = clean(c.title, Clean::utf8);
  j["group"] = clean(c.group, Clean::utf8);
  j["level"] = clean(c.level, Clean::utf8);
  j["transport"] = clean(c.transport, Clean::utf8);  // fire, fires, ws or wss: the same id runs over each
  j["spec"]["section"] = clean(c.spec.section, Clean::utf8);
  j["spec"]["quote"] = clean(c.spec.quote, Clean::utf8);
  j["requirements"] = strings_json(c.requirements);
  j["tags"] = strings_json(c.tags);
  j["verdict"] = verdict_name(c.verdict);
  j["message"] = clean(c.message, Clean::utf8);
  // Stable types for consumers: -1 and "" when no step failed, as in the data model.
  j["failed_step"] = c.failed_step;
  j["failed_step_text"] = clean(c.failed_step_text, Clean::utf8);
  j["duration_ms"] = c.duration_ms;
  j["transcript"] = transcript_json(c.transcript);
  j["violations"] = violations_json(c.violations);  // the wire monitor's findings (harness/rules/wire_monitor.h)
  return j;
}

Json counts_json(const RunResult& run) {
  const auto counts = run.counts();
  Json j;
  j["pass"] = counts.at(Verdict::pass);
  j["fail"] = counts.at(Verdict::fail);
  j["skipped"] = counts.at(Verdict::skipped);
  j["error"] = counts.at(Verdict::error);
  j["expected_fail"] = counts.at(Verdict::expected_fail);
  j["unexpected_pass"] = counts.at(Verdict::unexpected_pass);
  j["total"] = run.cases.size();
  return j;
}

Json run_json(const RunResult& run) {
  Json j;
  j["format"] = "firemq-conform-report";
  j["version"] = 1;
  j["run_id"] = clean(run.run_id, Clean::utf8);
  j["started_at"] = clean(run.started_at, Clean::utf8);
  j["duration_ms"] = run.duration_ms;
  j["target"] = clean(run.target, Clean::utf8);
  j["harness_version"] = clean(run.harness_version, Clean::utf8);
  j["server"]["name"] = clean(run.server_name, Clean::utf8);
  j["server"]["version"] = clean(run.server_version, Clean::utf8);
  j["server"]["caps"] = strings_json(run.server_caps);
  j["command_line"] = clean(run.command_line, Clean::utf8);
  j["passed"] = run.passed();
  j["counts"] = counts_json(run);
  const Coverage cov = coverage(run);
  j["requirements"]["total"] = cov.total;
  j["requirements"]["covered"] = cov.covered;
  j["requirements"]["uncovered"] = strings_json(cov.uncovered);
  j["requirements"]["monitor_rules"] = strings_json(run.monitor_rules);
  // Why no case checks an uncovered requirement, where the catalog says (requirements.json "untested_because").
  j["requirements"]["untested_because"] = Json::object();
  for (const Requirement& r : run.requirements) {
    if (!r.untested_because.empty() && std::ranges::find(cov.uncovered, r.id) != cov.uncovered.end()) {
      j["requirements"]["untested_because"][r.id] = r.untested_because;
    }
  }
  j["cases"] = Json::array();
  for (const CaseResult& c : run.cases) j["cases"].push_back(case_json(c));
  return j;
}

}  // namespace

std::string report_json(const RunResult& run) {
  // replace: a stray invalid byte must not make dump() throw; clean() should already have removed them.
  return run_json(run).dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace firemq::conform
