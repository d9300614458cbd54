// report.html (reports.h): one self-contained page for a person, the verdict first, then the failures, then
// every case by group. No JavaScript: a checkbox and a CSS sibling selector filter the rows.
#include "harness/reports/reports.h"

#include <string_view>

#include "harness/reports/report_common.h"

namespace firemq::conform {
namespace {

using namespace report;  // the writers' shared helpers

constexpr std::size_t kHtmlTranscriptLines = 400;  // per case; report.json always has them all

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
    s += "<p class=\"muted\">" + std::to_string(transcript.size() - shown) + " more lines in report.json.</p>\n";
  }
  return s;
}

// The wire monitor's findings: the rule, the spec's sentence, and the frames around it.
std::string html_violations(const std::vector<MonitorViolation>& violations) {
  std::string s;
  for (const MonitorViolation& v : violations) {
    s += "<div class=\"label\">Wire monitor: <code>" + h(v.rule) + "</code> on " + h(v.connection) + " at " +
         fixed(v.at_ms, 1) + " ms</div>\n<p class=\"message\">" + h(v.message) + "</p>\n<blockquote>" +
         h(v.spec.section) + ": " + h(v.spec.quote) + "</blockquote>\n" + html_transcript(v.context);
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
    s += "<div class=\"label\">Failed step " + std::to_string(c.failed_step) + "</div>\n<pre>" + h(c.failed_step_text) +
         "</pre>\n";
  }
  return s + html_violations(c.violations);
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
                  badge(c.verdict) + "<code class=\"id\">" + h(c.id) + "</code><span>" + h(c.title) + "</span><span>" +
                  level_tag(c.level) + "</span><span class=\"dur\">" + human_duration(c.duration_ms) +
                  "</span></summary>\n<div class=\"body\">\n";
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
  const double percent = cov.total == 0 ? 100.0
                                        : 100.0 * static_cast<double>(cov.covered) / static_cast<double>(cov.total);
  std::string s = "<div><b>Requirement coverage:</b> " + std::to_string(cov.covered) + "/" + std::to_string(cov.total) +
                  " covered (" + fixed(percent, 0) +
                  "%)</div>\n<div class=\"bar\"><span style=\"width:" + fixed(percent, 1) + "%\"></span></div>\n";
  if (cov.uncovered.empty()) return s;
  s += "<details><summary>" + std::to_string(cov.uncovered.size()) +
       " uncovered requirements</summary>\n<table class=\"reqs\"><tr><th>id</th><th>level</th><th>section</th>"
       "<th>text</th><th>why no case checks it</th></tr>\n";
  for (const Requirement& r : run.requirements) {
    if (std::ranges::find(cov.uncovered, r.id) == cov.uncovered.end()) continue;
    s += "<tr><td><code>" + h(r.id) + "</code></td><td>" + level_tag(r.level) + "</td><td>" + h(r.section) +
         "</td><td>" + h(r.text) + "</td><td>" + h(r.untested_because) + "</td></tr>\n";
  }
  return s + "</table></details>\n";
}

std::string html_header(const RunResult& run) {
  const bool passed = run.passed();
  std::string s = std::string("<header class=\"run ") + (passed ? "passed" : "failed") +
                  "\">\n<h1>FireMQ conformance</h1>\n<div class=\"verdict\">" + (passed ? "PASSED" : "FAILED") +
                  "</div>\n";
  if (!passed && problems(run).empty()) s += "<div class=\"why\">No case was executed.</div>\n";
  s += "<dl class=\"facts\"><dt>Target</dt><dd>" + h(run.target) + "</dd><dt>Server</dt><dd>" + h(server_text(run)) +
       "</dd>";
  if (!run.server_caps.empty()) s += "<dt>Capabilities</dt><dd>" + h(join(run.server_caps, ", ")) + "</dd>";
  s += "<dt>Duration</dt><dd>" + human_duration(run.duration_ms) + "</dd><dt>Started</dt><dd>" + h(run.started_at) +
       "</dd><dt>Run</dt><dd><code>" + h(run.run_id) + "</code></dd><dt>Harness</dt><dd>" + h(run.harness_version) +
       "</dd>";
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

}  // namespace

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

}  // namespace firemq::conform
