// junit.xml (reports.h): one testsuite per group, one testcase per case, for CI test tabs. A failure carries
// everything a CI log reader needs: the spec sentence, the message, the failed step and the transcript.
#include "harness/reports/reports.h"

#include <string_view>
#include <utility>

#include "harness/reports/report_common.h"

namespace firemq::conform {
namespace {

using namespace report;  // the writers' shared helpers

constexpr std::size_t kJunitTranscriptLines = 200;  // per case; report.json always has them all

std::string xml_escape(std::string_view s, bool attribute) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      // Attribute-value normalization would turn these into spaces; character references survive it.
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += "&#13;"; break;  // a bare CR in text would be normalized to LF
      default: out += c;
    }
  }
  return out;
}

std::string xml_text(std::string_view s) { return xml_escape(clean(s, Clean::text), false); }
std::string xml_attr(std::string_view s) { return xml_escape(clean(s, Clean::text), true); }

std::string transcript_line_text(const TranscriptLine& line) {
  std::string s = "  " + fixed(line.at_ms, 1) + " ms  " + line.connection + "  " + line.direction;
  if (!line.op.empty()) s += "  " + line.op;
  if (!line.header_json.empty()) s += "  " + line.header_json;
  if (line.payload_size > 0 || !line.payload_preview.empty()) {
    s += "  [payload " + std::to_string(line.payload_size) + " B: " + line.payload_preview + "]";
  }
  return s + "\n";
}

std::string transcript_text(const std::vector<TranscriptLine>& transcript, std::size_t max_lines) {
  if (transcript.empty()) return "Transcript: (empty)\n";
  std::string s = "Transcript:\n";
  const std::size_t shown = std::min(transcript.size(), max_lines);
  for (std::size_t i = 0; i < shown; ++i) s += transcript_line_text(transcript[i]);
  if (shown < transcript.size()) {
    s += "  ... " + std::to_string(transcript.size() - shown) + " more lines in report.json\n";
  }
  return s;
}

// Everything someone reading a CI log needs to understand a failure without opening another file.
std::string problem_text(const CaseResult& c) {
  std::string s = std::string(verdict_name(c.verdict)) + " [" + c.level + "] " + c.id;
  if (!c.title.empty()) s += " - " + c.title;
  s += "\nSpec: " + (c.spec.section.empty() ? std::string("(no section)") : c.spec.section) + "\n";
  if (!c.spec.quote.empty()) s += "  \"" + c.spec.quote + "\"\n";
  if (!c.requirements.empty()) s += "Requirements: " + join(c.requirements, ", ") + "\n";
  s += "Message: " + shown_message(c) + "\n";
  if (c.failed_step >= 0) s += "Failed step " + std::to_string(c.failed_step) + ": " + c.failed_step_text + "\n";
  return s + transcript_text(c.transcript, kJunitTranscriptLines);
}

std::string junit_properties(const RunResult& run) {
  const std::pair<std::string_view, std::string> properties[] = {
      {"target", run.target},
      {"server.name", run.server_name},
      {"server.version", run.server_version},
      {"server.caps", join(run.server_caps, ",")},
      {"harness_version", run.harness_version},
      {"run_id", run.run_id},
  };
  std::string s = "    <properties>\n";
  for (const auto& [name, value] : properties) {
    s += "      <property name=\"" + std::string(name) + "\" value=\"" + xml_attr(value) + "\"/>\n";
  }
  return s + "    </properties>\n";
}

std::string junit_testcase(const CaseResult& c) {
  // The transport is part of the class name: a run over every transport has each case id once per transport.
  const std::string transport = c.transport.empty() ? "" : xml_attr(c.transport) + ".";
  std::string s = "    <testcase name=\"" + xml_attr(c.id) + "\" classname=\"firemq.conform." + transport +
                  xml_attr(group_name(c)) + "\" time=\"" + seconds(c.duration_ms) + "\"";
  // CI UIs show the message attribute on its own, so it names an unexpected pass as such.
  const std::string prefix = c.verdict == Verdict::unexpected_pass ? "unexpected pass: " : "";
  const std::string message = xml_attr(one_line(prefix + shown_message(c), kMessageChars));
  switch (c.verdict) {
    case Verdict::pass: return s + "/>\n";
    case Verdict::fail:
    case Verdict::unexpected_pass:
      s += ">\n      <failure message=\"" + message + "\" type=\"" + verdict_name(c.verdict) + "\">";
      return s + xml_text(problem_text(c)) + "</failure>\n    </testcase>\n";
    case Verdict::error:
      s += ">\n      <error message=\"" + message + "\" type=\"error\">";
      return s + xml_text(problem_text(c)) + "</error>\n    </testcase>\n";
    case Verdict::skipped: return s + ">\n      <skipped message=\"" + message + "\"/>\n    </testcase>\n";
    case Verdict::expected_fail:
      s += ">\n      <system-out>expected failure (known-failures file)";
      if (!c.message.empty()) s += ": " + xml_text(c.message);
      return s + "</system-out>\n    </testcase>\n";
  }
  return s + "/>\n";
}

std::string junit_suite(const RunResult& run, const Group& group) {
  const auto& cases = group.cases;
  std::string s = "  <testsuite name=\"" + xml_attr(group.name) + "\" tests=\"" + std::to_string(cases.size()) +
                  "\" failures=\"" +
                  std::to_string(count_of(cases, Verdict::fail) + count_of(cases, Verdict::unexpected_pass)) +
                  "\" errors=\"" + std::to_string(count_of(cases, Verdict::error)) + "\" skipped=\"" +
                  std::to_string(count_of(cases, Verdict::skipped)) + "\" time=\"" + seconds(total_ms(cases)) +
                  "\" timestamp=\"" + xml_attr(run.started_at) + "\">\n";
  s += junit_properties(run);
  for (const CaseResult* c : cases) s += junit_testcase(*c);
  return s + "  </testsuite>\n";
}

}  // namespace

std::string junit_xml(const RunResult& run) {
  const auto counts = run.counts();
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"firemq-conform\" tests=\"" +
                  std::to_string(run.cases.size()) + "\" failures=\"" +
                  std::to_string(counts.at(Verdict::fail) + counts.at(Verdict::unexpected_pass)) + "\" errors=\"" +
                  std::to_string(counts.at(Verdict::error)) + "\" skipped=\"" +
                  std::to_string(counts.at(Verdict::skipped)) + "\" time=\"" + seconds(run.duration_ms) +
                  "\" timestamp=\"" + xml_attr(run.started_at) + "\">\n";
  auto suites = groups(run);
  // An empty run still carries its properties (target, server), so CI shows what was tested.
  if (suites.empty()) suites.push_back(Group{"firemq-conform", {}});
  for (const Group& group : suites) s += junit_suite(run, group);
  return s + "</testsuites>\n";
}

}  // namespace firemq::conform
