// The report writers of the conformance harness (see reports.h): JSON for machines, JUnit XML for CI test
// tabs, one HTML page for a person, Markdown for a CI step summary, and the console lines.
//
// Peer bytes (headers, payload previews, messages, server names) can be anything, including invalid UTF-8,
// control characters and markup. Every string therefore passes through clean() before it is escaped for
// its format: invalid UTF-8 and control characters become "\xNN" text, the convention payload_preview
// already uses, so every report stays well-formed and no escape sequence reaches a terminal.
#include "harness/reports.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <exception>
#include <fstream>
#include <string_view>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

namespace firemq::conform {
namespace {

// ===== Limits: a report stays readable whatever a case logged =====

constexpr std::size_t kHtmlTranscriptLines = 400;  // per case; report.json always has them all
constexpr std::size_t kJunitTranscriptLines = 200;
constexpr std::size_t kMarkdownFailures = 50;      // a step summary is capped at 1 MiB by GitHub
constexpr std::size_t kMarkdownUncovered = 50;
constexpr std::size_t kConsoleFailures = 20;
constexpr std::size_t kMessageChars = 400;         // messages in Markdown and attributes
constexpr std::size_t kConsoleMessageChars = 200;
constexpr int kMaxHeaderNesting = 64;              // nlohmann's serializer recurses

// ===== Text cleaning =====

enum class Clean {
  utf8,      // escape invalid UTF-8 only (JSON escapes control characters itself)
  text,      // also control characters other than tab, newline and carriage return
  one_line,  // also turn tab, newline and carriage return into spaces
};

void append_hex_escape(std::string& out, unsigned char byte) {
  constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[byte >> 4];
  out += kHex[byte & 0x0f];
}

// Length of the valid UTF-8 sequence at s[i] and its code point, or 0 when the bytes there are not one
// (overlong forms, surrogates and code points past U+10FFFF are not).
std::size_t decode_utf8(std::string_view s, std::size_t i, char32_t& code) {
  const auto lead = static_cast<unsigned char>(s[i]);
  std::size_t len = 1;
  char32_t min = 0;
  if (lead < 0x80) {
    code = lead;
    return 1;
  } else if ((lead & 0xe0) == 0xc0) {
    len = 2, min = 0x80, code = lead & 0x1fu;
  } else if ((lead & 0xf0) == 0xe0) {
    len = 3, min = 0x800, code = lead & 0x0fu;
  } else if ((lead & 0xf8) == 0xf0) {
    len = 4, min = 0x10000, code = lead & 0x07u;
  } else {
    return 0;
  }
  if (s.size() - i < len) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto next = static_cast<unsigned char>(s[i + k]);
    if ((next & 0xc0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3fu);
  }
  if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return len;
}

bool is_line_space(char32_t c) { return c == '\t' || c == '\n' || c == '\r'; }

// C0 and C1 controls, DEL, and the two non-characters XML 1.0 forbids.
bool is_control(char32_t c) {
  if (is_line_space(c)) return false;
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0xfffe || c == 0xffff;
}

std::string clean(std::string_view s, Clean mode) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    char32_t code = 0;
    const std::size_t len = decode_utf8(s, i, code);
    if (len == 0) {
      append_hex_escape(out, static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (mode == Clean::one_line && is_line_space(code)) {
      out += ' ';
    } else if (mode != Clean::utf8 && is_control(code)) {
      for (std::size_t k = 0; k < len; ++k) append_hex_escape(out, static_cast<unsigned char>(s[i + k]));
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out;
}

// Cuts valid UTF-8 at a character boundary, marking the cut.
std::string truncate(std::string s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
  s.resize(cut);
  s += "…";
  return s;
}

std::string one_line(std::string_view s, std::size_t max_bytes) {
  return truncate(clean(s, Clean::one_line), max_bytes);
}

// ===== Numbers: locale-independent, finite =====

std::string fixed(double v, int precision) {
  if (!std::isfinite(v)) v = 0;
  char buf[512];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, precision);
  if (ec != std::errc{}) return "0";
  return std::string(buf, end);
}

std::string seconds(double ms) { return fixed(std::max(ms, 0.0) / 1000, 3); }

// "850 ms", "3.2 s": for people.
std::string human_duration(double ms) {
  if (!std::isfinite(ms) || ms < 0) ms = 0;
  if (ms < 1000) return fixed(ms, 0) + " ms";
  return fixed(ms / 1000, 1) + " s";
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

// ===== Facts about the run every report uses =====

constexpr Verdict kVerdicts[] = {Verdict::pass,  Verdict::fail,          Verdict::skipped,
                                 Verdict::error, Verdict::expected_fail, Verdict::unexpected_pass};

// The verdicts that fail a run, in the order reports list them.
constexpr Verdict kProblemVerdicts[] = {Verdict::fail, Verdict::unexpected_pass, Verdict::error};

bool is_problem(Verdict v) { return std::ranges::find(kProblemVerdicts, v) != std::end(kProblemVerdicts); }

// Failing cases grouped by verdict (fail, unexpected pass, error), each group in case order.
std::vector<const CaseResult*> problems(const RunResult& run) {
  std::vector<const CaseResult*> out;
  for (Verdict v : kProblemVerdicts) {
    for (const CaseResult& c : run.cases) {
      if (c.verdict == v) out.push_back(&c);
    }
  }
  return out;
}

std::string group_name(const CaseResult& c) { return c.group.empty() ? "ungrouped" : c.group; }

struct Group {
  std::string name;
  std::vector<const CaseResult*> cases;
};

// Groups in the order they first appear, so reports follow the case files.
std::vector<Group> groups(const RunResult& run) {
  std::vector<Group> out;
  for (const CaseResult& c : run.cases) {
    const std::string name = group_name(c);
    auto it = std::ranges::find(out, name, &Group::name);
    if (it == out.end()) it = out.insert(out.end(), Group{name, {}});
    it->cases.push_back(&c);
  }
  return out;
}

int count_of(const std::vector<const CaseResult*>& cases, Verdict v) {
  return static_cast<int>(std::ranges::count(cases, v, &CaseResult::verdict));
}

double total_ms(const std::vector<const CaseResult*>& cases) {
  double sum = 0;
  for (const CaseResult* c : cases) sum += std::isfinite(c->duration_ms) ? std::max(c->duration_ms, 0.0) : 0;
  return sum;
}

struct Coverage {
  std::size_t total = 0;
  std::size_t covered = 0;
  std::vector<std::string> uncovered;
};

Coverage coverage(const RunResult& run) {
  Coverage out;
  out.uncovered = run.uncovered_requirements();
  out.total = run.requirements.size();
  out.covered = out.total - out.uncovered.size();
  return out;
}

std::string server_text(const RunResult& run) {
  std::string s = run.server_name;
  if (!run.server_version.empty()) s += (s.empty() ? "" : " ") + run.server_version;
  return s.empty() ? "unknown (no connection got as far as welcome)" : s;
}

// "142 cases: 140 pass, 0 fail, 2 skipped, 0 error, 0 expected-fail, 0 unexpected-pass"
std::string counts_text(const RunResult& run) {
  const auto counts = run.counts();
  std::string s = std::to_string(run.cases.size()) + (run.cases.size() == 1 ? " case: " : " cases: ");
  bool first = true;
  for (Verdict v : kVerdicts) {
    s += (first ? "" : ", ") + std::to_string(counts.at(v)) + " " + verdict_name(v);
    first = false;
  }
  return s;
}

std::string unexpected_pass_text(const CaseResult& c) {
  std::string s = "listed in the known-failures file, but passed";
  if (!c.message.empty()) s += ": " + c.message;
  return s;
}

// The message a report shows for a case, never empty for a problem.
std::string shown_message(const CaseResult& c) {
  if (c.verdict == Verdict::unexpected_pass) return unexpected_pass_text(c);
  if (c.message.empty() && is_problem(c.verdict)) return "(no message)";
  return c.message;
}

// ===== report.json =====

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

Json case_json(const CaseResult& c) {
  Json j;
  j["id"] = clean(c.id, Clean::utf8);
  j["title"] = clean(c.title, Clean::utf8);
  j["group"] = clean(c.group, Clean::utf8);
  j["level"] = clean(c.level, Clean::utf8);
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
  j["cases"] = Json::array();
  for (const CaseResult& c : run.cases) j["cases"].push_back(case_json(c));
  return j;
}

// ===== junit.xml =====

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
  std::string s = "    <testcase name=\"" + xml_attr(c.id) + "\" classname=\"firemq.conform." +
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
    case Verdict::skipped:
      return s + ">\n      <skipped message=\"" + message + "\"/>\n    </testcase>\n";
    case Verdict::expected_fail:
      s += ">\n      <system-out>expected failure (known-failures file)";
      if (!c.message.empty()) s += ": " + xml_text(c.message);
      return s + "</system-out>\n    </testcase>\n";
  }
  return s + "/>\n";
}

std::string junit_suite(const RunResult& run, const Group& group) {
  const auto& cases = group.cases;
  std::string s = "  <testsuite name=\"" + xml_attr(group.name) + "\" tests=\"" +
                  std::to_string(cases.size()) + "\" failures=\"" +
                  std::to_string(count_of(cases, Verdict::fail) + count_of(cases, Verdict::unexpected_pass)) +
                  "\" errors=\"" + std::to_string(count_of(cases, Verdict::error)) + "\" skipped=\"" +
                  std::to_string(count_of(cases, Verdict::skipped)) + "\" time=\"" + seconds(total_ms(cases)) +
                  "\" timestamp=\"" + xml_attr(run.started_at) + "\">\n";
  s += junit_properties(run);
  for (const CaseResult* c : cases) s += junit_testcase(*c);
  return s + "  </testsuite>\n";
}

// ===== report.html =====

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string h(std::string_view s) { return html_escape(clean(s, Clean::text)); }

// Verdict names are fixed ASCII words, fit for class names as they are.
std::string badge(Verdict v) {
  const std::string name = verdict_name(v);
  return "<span class=\"badge v-" + name + "\">" + name + "</span>";
}

std::string level_tag(const std::string& level) {
  if (level.empty()) return "";
  return "<span class=\"level l-" + h(level) + "\">" + h(level) + "</span>";
}

constexpr std::string_view kHtmlStyle = R"css(
:root{--pass:#1a7f37;--fail:#cf222e;--error:#bc4c00;--skipped:#6e7781;--xfail:#8250df;--xpass:#bf3989;
--border:#d0d7de;--muted:#57606a;--soft:#f6f8fa;--text:#1f2328}
*{box-sizing:border-box}
body{margin:0;color:var(--text);background:#fff;
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Helvetica Neue",Arial,sans-serif}
.wrap{max-width:1180px;margin:0 auto;padding:24px 28px 64px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:13px}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0;padding:8px 10px;background:var(--soft);
border-radius:6px}
h1{font-size:15px;font-weight:600;color:var(--muted);margin:0;text-transform:uppercase;letter-spacing:.08em}
h2{font-size:22px;margin:36px 0 12px;padding-bottom:6px;border-bottom:1px solid var(--border)}
h3{font-size:17px;margin:20px 0 8px}
.muted{color:var(--muted);font-weight:400}
.run{border:1px solid var(--border);border-top:8px solid var(--pass);border-radius:8px;padding:18px 24px}
.run.failed{border-top-color:var(--fail)}
.verdict{font-size:52px;font-weight:800;letter-spacing:.04em;line-height:1.1;margin:6px 0 10px;color:var(--pass)}
.run.failed .verdict{color:var(--fail)}
.why{font-size:15px;font-weight:600;color:var(--fail);margin:-4px 0 10px}
dl.facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 18px;margin:0 0 14px}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0;overflow-wrap:anywhere}
.counts{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.count{border:1px solid var(--border);border-radius:8px;padding:4px 12px;min-width:92px}
.count b{display:block;font-size:22px;line-height:1.2}
.count.zero{opacity:.45}
.count.v-pass b{color:var(--pass)}.count.v-fail b{color:var(--fail)}.count.v-error b{color:var(--error)}
.count.v-skipped b{color:var(--skipped)}.count.v-expected-fail b{color:var(--xfail)}
.count.v-unexpected-pass b{color:var(--xpass)}
.bar{height:8px;background:#eaeef2;border-radius:4px;overflow:hidden;max-width:420px;margin:4px 0}
.bar span{display:block;height:100%;background:var(--pass)}
details>summary{cursor:pointer}
.badge{display:inline-block;min-width:62px;text-align:center;border-radius:999px;padding:0 8px;font-size:12px;
font-weight:600;color:#fff;line-height:20px;white-space:nowrap}
.v-pass.badge{background:var(--pass)}.v-fail.badge{background:var(--fail)}.v-error.badge{background:var(--error)}
.v-skipped.badge{background:var(--skipped)}.v-expected-fail.badge{background:var(--xfail)}
.v-unexpected-pass.badge{background:var(--xpass)}
.level{font-size:11px;font-weight:700;border:1px solid var(--border);border-radius:4px;padding:0 5px;
color:var(--muted)}
.level.l-MUST{color:var(--fail);border-color:#ffcecb}.level.l-SHOULD{color:var(--error);border-color:#ffd8b5}
.problem{border:1px solid var(--border);border-left:6px solid var(--fail);border-radius:8px;padding:12px 18px;
margin:14px 0}
.problem.v-error{border-left-color:var(--error)}.problem.v-unexpected-pass{border-left-color:var(--xpass)}
.problem h3{margin:0 0 4px;display:flex;gap:10px;align-items:baseline;flex-wrap:wrap}
.meta{color:var(--muted);margin:2px 0 8px;font-size:14px}
blockquote{margin:8px 0;padding:6px 14px;border-left:4px solid #8c959f;background:var(--soft);
font-style:italic}
.message{white-space:pre-wrap;overflow-wrap:anywhere;font-weight:600;margin:8px 0}
.label{font-size:13px;font-weight:600;color:var(--muted);margin:10px 0 2px}
table{border-collapse:collapse}
table.transcript{width:100%;font-size:12.5px;table-layout:fixed}
table.transcript th{text-align:left;color:var(--muted);font-weight:600;border-bottom:1px solid var(--border);
padding:3px 6px}
table.transcript td{border-bottom:1px solid #eaeef2;padding:3px 6px;vertical-align:top;overflow-wrap:anywhere}
table.transcript td.t{text-align:right;white-space:nowrap}
table.transcript tr.received td{background:#f4f9ff}
table.transcript tr.note td{color:var(--muted);font-style:italic}
col.c-t{width:78px}col.c-conn{width:96px}col.c-dir{width:96px}col.c-op{width:120px}col.c-pay{width:24%}
.filter{margin:6px 0 4px;display:inline-block}
#only-problems:checked~.groups details.case.ok{display:none}
.cases{border:1px solid var(--border);border-radius:8px;overflow:hidden}
details.case{border-top:1px solid #eaeef2}
details.case:first-child{border-top:0}
details.case>summary{display:grid;grid-template-columns:16px 124px minmax(0,1.3fr) minmax(0,2fr) 64px 72px;
gap:10px;align-items:baseline;padding:5px 12px;list-style:none}
details.case>summary::-webkit-details-marker{display:none}
details.case>summary::before{content:"\25B8";color:var(--muted)}
details.case[open]>summary::before{content:"\25BE"}
details.case>summary:hover{background:var(--soft)}
details.case .id{overflow-wrap:anywhere}
details.case .dur{text-align:right;color:var(--muted);font-size:13px}
details.case .body{padding:4px 16px 14px 40px;background:#fcfcfd}
table.reqs td,table.reqs th{text-align:left;padding:2px 10px 2px 0;vertical-align:top;font-size:14px}
footer{margin-top:40px;color:var(--muted);font-size:13px}
)css";

std::string html_transcript(const std::vector<TranscriptLine>& transcript) {
  if (transcript.empty()) return "<p class=\"muted\">No transcript.</p>\n";
  std::string s =
      "<table class=\"transcript\"><colgroup><col class=\"c-t\"><col class=\"c-conn\"><col class=\"c-dir\">"
      "<col class=\"c-op\"><col><col class=\"c-pay\"></colgroup>\n"
      "<tr><th>ms</th><th>connection</th><th>direction</th><th>op</th><th>header</th><th>payload</th></tr>\n";
  const std::size_t shown = std::min(transcript.size(), kHtmlTranscriptLines);
  for (std::size_t i = 0; i < shown; ++i) {
    const TranscriptLine& line = transcript[i];
    const std::string arrow = line.direction == "sent" ? "→ " : line.direction == "received" ? "← " : "";
    s += "<tr class=\"" + h(line.direction) + "\"><td class=\"t mono\">" + fixed(line.at_ms, 1) + "</td><td>" +
         h(line.connection) + "</td><td>" + arrow + h(line.direction) + "</td><td class=\"mono\">" + h(line.op) +
         "</td><td class=\"mono\">" + h(line.header_json) + "</td><td>";
    if (line.payload_size > 0 || !line.payload_preview.empty()) {
      s += std::to_string(line.payload_size) + " B <code>" + h(line.payload_preview) + "</code>";
    }
    s += "</td></tr>\n";
  }
  s += "</table>\n";
  if (shown < transcript.size()) {
    s += "<p class=\"muted\">" + std::to_string(transcript.size() - shown) +
         " more lines in report.json.</p>\n";
  }
  return s;
}

// Spec reference, message and failed step: shared by the failures section and the expandable rows.
std::string html_case_details(const CaseResult& c) {
  std::string s;
  std::string meta = level_tag(c.level);
  if (!c.spec.section.empty()) meta += " " + h(c.spec.section);
  if (!c.requirements.empty()) meta += " · requirements " + h(join(c.requirements, ", "));
  if (!c.tags.empty()) meta += " · tags " + h(join(c.tags, ", "));
  meta += " · " + human_duration(c.duration_ms);
  s += "<p class=\"meta\">" + meta + "</p>\n";
  if (!c.spec.quote.empty()) s += "<blockquote>" + h(c.spec.quote) + "</blockquote>\n";
  const std::string message = shown_message(c);
  if (!message.empty()) s += "<p class=\"message\">" + h(message) + "</p>\n";
  if (c.failed_step >= 0) {
    s += "<div class=\"label\">Failed step " + std::to_string(c.failed_step) + "</div>\n<pre>" +
         h(c.failed_step_text) + "</pre>\n";
  }
  return s;
}

std::string html_problem(const CaseResult& c) {
  const std::string v = verdict_name(c.verdict);
  std::string s = "<article class=\"problem v-" + v + "\">\n<h3>" + badge(c.verdict) + "<code>" + h(c.id) +
                  "</code><span>" + h(c.title) + "</span></h3>\n";
  s += html_case_details(c);
  s += "<div class=\"label\">Transcript</div>\n" + html_transcript(c.transcript);
  return s + "</article>\n";
}

std::string html_case_row(const CaseResult& c) {
  const std::string v = verdict_name(c.verdict);
  std::string s = "<details class=\"case v-" + v + (is_problem(c.verdict) ? "" : " ok") + "\"><summary>" +
                  badge(c.verdict) + "<code class=\"id\">" + h(c.id) + "</code><span>" + h(c.title) +
                  "</span><span>" + level_tag(c.level) + "</span><span class=\"dur\">" +
                  human_duration(c.duration_ms) + "</span></summary>\n<div class=\"body\">\n";
  s += html_case_details(c);
  s += html_transcript(c.transcript);
  return s + "</div></details>\n";
}

std::string group_counts_text(const std::vector<const CaseResult*>& cases) {
  std::string s = std::to_string(cases.size()) + (cases.size() == 1 ? " case" : " cases");
  for (Verdict v : kVerdicts) {
    const int n = count_of(cases, v);
    if (n > 0) s += " · " + std::to_string(n) + " " + verdict_name(v);
  }
  return s;
}

std::string html_counts(const RunResult& run) {
  const auto counts = run.counts();
  std::string s = "<div class=\"counts\">";
  for (Verdict v : kVerdicts) {
    const int n = counts.at(v);
    s += std::string("<div class=\"count v-") + verdict_name(v) + (n == 0 ? " zero" : "") + "\"><b>" +
         std::to_string(n) + "</b>" + verdict_name(v) + "</div>";
  }
  return s + "<div class=\"count\"><b>" + std::to_string(run.cases.size()) + "</b>total</div></div>\n";
}

std::string html_coverage(const RunResult& run) {
  const Coverage cov = coverage(run);
  const double percent = cov.total == 0 ? 100.0 : 100.0 * static_cast<double>(cov.covered) /
                                                     static_cast<double>(cov.total);
  std::string s = "<div><b>Requirement coverage:</b> " + std::to_string(cov.covered) + "/" +
                  std::to_string(cov.total) + " covered (" + fixed(percent, 0) +
                  "%)</div>\n<div class=\"bar\"><span style=\"width:" + fixed(percent, 1) + "%\"></span></div>\n";
  if (cov.uncovered.empty()) return s;
  s += "<details><summary>" + std::to_string(cov.uncovered.size()) +
       " uncovered requirements</summary>\n<table class=\"reqs\"><tr><th>id</th><th>level</th><th>section</th>"
       "<th>text</th></tr>\n";
  for (const Requirement& r : run.requirements) {
    if (std::ranges::find(cov.uncovered, r.id) == cov.uncovered.end()) continue;
    s += "<tr><td><code>" + h(r.id) + "</code></td><td>" + level_tag(r.level) + "</td><td>" + h(r.section) +
         "</td><td>" + h(r.text) + "</td></tr>\n";
  }
  return s + "</table></details>\n";
}

std::string html_header(const RunResult& run) {
  const bool passed = run.passed();
  std::string s = std::string("<header class=\"run ") + (passed ? "passed" : "failed") +
                  "\">\n<h1>FireMQ conformance</h1>\n<div class=\"verdict\">" + (passed ? "PASSED" : "FAILED") +
                  "</div>\n";
  if (!passed && problems(run).empty()) s += "<div class=\"why\">No case was executed.</div>\n";
  s += "<dl class=\"facts\"><dt>Target</dt><dd>" + h(run.target) + "</dd><dt>Server</dt><dd>" +
       h(server_text(run)) + "</dd>";
  if (!run.server_caps.empty()) s += "<dt>Capabilities</dt><dd>" + h(join(run.server_caps, ", ")) + "</dd>";
  s += "<dt>Duration</dt><dd>" + human_duration(run.duration_ms) + "</dd><dt>Started</dt><dd>" +
       h(run.started_at) + "</dd><dt>Run</dt><dd><code>" + h(run.run_id) + "</code></dd><dt>Harness</dt><dd>" +
       h(run.harness_version) + "</dd>";
  if (!run.command_line.empty()) s += "<dt>Command</dt><dd><code>" + h(run.command_line) + "</code></dd>";
  s += "</dl>\n" + html_counts(run) + html_coverage(run);
  return s + "</header>\n";
}

std::string html_failures(const RunResult& run) {
  const auto list = problems(run);
  if (list.empty()) return "";
  std::string s = "<section id=\"failures\"><h2>Failures <span class=\"muted\">(" + std::to_string(list.size()) +
                  ")</span></h2>\n";
  for (const CaseResult* c : list) s += html_problem(*c);
  return s + "</section>\n";
}

std::string html_all_cases(const RunResult& run) {
  std::string s = "<section id=\"cases\"><h2>All cases</h2>\n";
  if (run.cases.empty()) return s + "<p class=\"muted\">No cases.</p></section>\n";
  // A checkbox and a sibling selector filter the rows without JavaScript.
  s += "<input type=\"checkbox\" id=\"only-problems\"> <label class=\"filter\" for=\"only-problems\">"
       "Show only failures and errors</label>\n<div class=\"groups\">\n";
  for (const Group& group : groups(run)) {
    s += "<h3>" + h(group.name) + " <span class=\"muted\">" + group_counts_text(group.cases) +
         "</span></h3>\n<div class=\"cases\">\n";
    for (const CaseResult* c : group.cases) s += html_case_row(*c);
    s += "</div>\n";
  }
  return s + "</div></section>\n";
}

// ===== summary.md =====

// Backslash-escapes the characters that change inline Markdown meaning (CommonMark allows it for any ASCII
// punctuation), on one line so peer text cannot start a block or break a table.
std::string md_text(std::string_view s, std::size_t max_bytes) {
  constexpr std::string_view kSignificant = "\\`*_[]<>|&~#";
  const std::string line = one_line(s, max_bytes);
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    // A leading "-", "+" or "=" would start a list or a heading underline inside a quote.
    const bool leading = i == 0 && (c == '-' || c == '+' || c == '=');
    if (leading || kSignificant.find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// An inline code span that holds any text: the fence is longer than the longest run of backticks inside.
std::string md_code(std::string_view s) {
  const std::string line = one_line(s, kMessageChars);
  std::size_t longest = 0;
  std::size_t run = 0;
  for (char c : line) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = !line.empty() && (line.front() == '`' || line.back() == '`');
  return fence + (pad ? " " : "") + line + (pad ? " " : "") + fence;
}

std::string md_title(const RunResult& run) {
  const auto counts = run.counts();
  std::string s = run.passed() ? "## ✅ FireMQ conformance: passed" : "## ❌ FireMQ conformance: failed";
  s += " — " + std::to_string(run.cases.size()) + " cases: " + std::to_string(counts.at(Verdict::pass)) +
       " pass, " + std::to_string(counts.at(Verdict::fail)) + " fail";
  // The rarer verdicts only when they happened, to keep the title short.
  for (Verdict v : {Verdict::skipped, Verdict::error, Verdict::expected_fail, Verdict::unexpected_pass}) {
    if (counts.at(v) > 0) s += ", " + std::to_string(counts.at(v)) + " " + verdict_name(v);
  }
  return s + "\n\n";
}

std::string md_facts(const RunResult& run) {
  std::string s = "Target " + md_code(run.target) + " · server " + md_text(server_text(run), kMessageChars) +
                  " · " + human_duration(run.duration_ms) + " · run " + md_code(run.run_id) + "\n\n";
  if (!run.passed() && problems(run).empty()) s += "**No case was executed**, so the run does not pass.\n\n";
  return s;
}

std::string md_counts_table(const RunResult& run) {
  const auto counts = run.counts();
  std::string head = "|";
  std::string rule = "|";
  std::string row = "|";
  for (Verdict v : kVerdicts) {
    head += std::string(" ") + verdict_name(v) + " |";
    rule += "---:|";
    row += " " + std::to_string(counts.at(v)) + " |";
  }
  return head + " total |\n" + rule + "---:|\n" + row + " " + std::to_string(run.cases.size()) + " |\n\n";
}

std::string md_failure(const CaseResult& c) {
  std::string s = "**" + md_code(c.id) + "**";
  for (const std::string* part : {&c.title, &c.level, &c.spec.section}) {
    if (!part->empty()) s += " — " + md_text(*part, kMessageChars);
  }
  if (c.verdict != Verdict::fail) s += std::string(" — **") + verdict_name(c.verdict) + "**";
  s += "\n\n";
  // Blank lines around the quote: a line right after it would be swallowed by it (lazy continuation).
  if (!c.spec.quote.empty()) s += "> " + md_text(c.spec.quote, 2 * kMessageChars) + "\n\n";
  return s + md_text(shown_message(c), kMessageChars) + "\n\n";
}

std::string md_failures(const RunResult& run) {
  const auto list = problems(run);
  if (list.empty()) return "";
  std::string s = "### Failures (" + std::to_string(list.size()) + ")\n\n";
  const std::size_t shown = std::min(list.size(), kMarkdownFailures);
  for (std::size_t i = 0; i < shown; ++i) s += md_failure(*list[i]);
  if (shown < list.size()) {
    s += "… and " + std::to_string(list.size() - shown) + " more (see report.html)\n\n";
  }
  return s;
}

std::string md_coverage(const RunResult& run) {
  const Coverage cov = coverage(run);
  std::string s = "### Requirement coverage\n\n" + std::to_string(cov.covered) + "/" + std::to_string(cov.total) +
                  " covered";
  if (cov.uncovered.empty()) return s + ".\n";
  s += ". Uncovered: ";
  const std::size_t shown = std::min(cov.uncovered.size(), kMarkdownUncovered);
  for (std::size_t i = 0; i < shown; ++i) s += (i == 0 ? "" : ", ") + md_code(cov.uncovered[i]);
  if (shown < cov.uncovered.size()) s += " … and " + std::to_string(cov.uncovered.size() - shown) + " more";
  return s + "\n";
}

// ===== Files =====

std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return "cannot create " + path.string() + ": " + std::generic_category().message(errno);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return "cannot write " + path.string() + ": " + std::generic_category().message(errno);
  return "";
}

}  // namespace

std::string report_json(const RunResult& run) {
  // replace: a stray invalid byte must not make dump() throw; clean() should already have removed them.
  return run_json(run).dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string junit_xml(const RunResult& run) {
  const auto counts = run.counts();
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"firemq-conform\" tests=\"" +
                  std::to_string(run.cases.size()) + "\" failures=\"" +
                  std::to_string(counts.at(Verdict::fail) + counts.at(Verdict::unexpected_pass)) +
                  "\" errors=\"" + std::to_string(counts.at(Verdict::error)) + "\" skipped=\"" +
                  std::to_string(counts.at(Verdict::skipped)) + "\" time=\"" + seconds(run.duration_ms) +
                  "\" timestamp=\"" + xml_attr(run.started_at) + "\">\n";
  auto suites = groups(run);
  // An empty run still carries its properties (target, server), so CI shows what was tested.
  if (suites.empty()) suites.push_back(Group{"firemq-conform", {}});
  for (const Group& group : suites) s += junit_suite(run, group);
  return s + "</testsuites>\n";
}

std::string report_html(const RunResult& run) {
  const bool passed = run.passed();
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>FireMQ "
                  "conformance: ";
  s += std::string(passed ? "PASSED" : "FAILED") + " — " + h(run.target) + "</title>\n<style>" +
       std::string(kHtmlStyle) + "</style>\n</head>\n<body>\n<div class=\"wrap\">\n";
  s += html_header(run) + html_failures(run) + html_all_cases(run);
  s += "<footer>firemq-conform " + h(run.harness_version) + " · " + h(counts_text(run)) +
       " · machine-readable: report.json, junit.xml</footer>\n";
  return s + "</div>\n</body>\n</html>\n";
}

std::string summary_markdown(const RunResult& run) {
  return md_title(run) + md_facts(run) + md_counts_table(run) + md_failures(run) + md_coverage(run);
}

std::string console_summary(const RunResult& run) {
  const Coverage cov = coverage(run);
  std::string s = "firemq-conform: " + counts_text(run) + " (" + human_duration(run.duration_ms) + ")\n";
  s += "requirements: " + std::to_string(cov.covered) + "/" + std::to_string(cov.total) + " covered\n";
  const auto list = problems(run);
  const std::size_t shown = std::min(list.size(), kConsoleFailures);
  for (std::size_t i = 0; i < shown; ++i) {
    const CaseResult& c = *list[i];
    const char* word = c.verdict == Verdict::fail    ? "FAILED"
                       : c.verdict == Verdict::error ? "ERROR"
                                                     : "UNEXPECTED-PASS";
    // one_line() escapes control characters, so peer text cannot drive the terminal.
    s += std::string(word) + " " + one_line(c.id, kConsoleMessageChars) + ": " +
         one_line(shown_message(c), kConsoleMessageChars) + "\n";
  }
  if (shown < list.size()) s += "... and " + std::to_string(list.size() - shown) + " more\n";
  const bool passed = run.passed();
  if (!passed && list.empty()) s += "no case was executed\n";
  return s + (passed ? "PASSED\n" : "FAILED\n");
}

std::string write_reports(const RunResult& run, const std::filesystem::path& dir) {
  try {
    // Render everything first, so a failure leaves no half-written set behind.
    const std::pair<const char*, std::string> files[] = {
        {"report.json", report_json(run)},
        {"junit.xml", junit_xml(run)},
        {"report.html", report_html(run)},
        {"summary.md", summary_markdown(run)},
    };
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return "cannot create " + dir.string() + ": " + ec.message();
    for (const auto& [name, text] : files) {
      if (std::string error = write_file(dir / name, text); !error.empty()) return error;
    }
    return "";
  } catch (const std::exception& e) {
    return std::string("cannot write the reports: ") + e.what();
  } catch (...) {
    return "cannot write the reports: unknown error";
  }
}

}  // namespace firemq::conform
