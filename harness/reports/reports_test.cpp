// Tests of the run verdict (run_result.cpp) and of the report writers (reports.cpp): what each report says
// about a run, and that peer bytes cannot break or inject into any of them.
#include "harness/reports/reports.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace firemq::conform {
namespace {

using nlohmann::json;

CaseResult make_case(std::string id, std::string group, Verdict verdict) {
  CaseResult c;
  c.id = std::move(id);
  c.group = std::move(group);
  c.verdict = verdict;
  c.title = "Title of " + c.id;
  c.level = "MUST";
  c.spec = {"Connection lifecycle / hello", "The server MUST refuse a hello with bad credentials."};
  c.duration_ms = 12.5;
  if (verdict != Verdict::pass) c.message = "message of " + c.id;
  return c;
}

TranscriptLine line(std::string direction, std::string op, std::string header) {
  TranscriptLine t;
  t.at_ms = 1.5;
  t.connection = "main";
  t.direction = std::move(direction);
  t.op = std::move(op);
  t.header_json = std::move(header);
  return t;
}

// Two groups, every verdict once, a catalog of three requirements of which one is uncovered.
RunResult sample_run() {
  RunResult run;
  run.run_id = "20261130T071903Z-4821";
  run.started_at = "2026-11-30T07:19:03Z";
  run.duration_ms = 3200;
  run.target = "fire://broker.example:5673";
  run.harness_version = "0.1.0";
  run.server_name = "FireMQ";
  run.server_version = "0.1.0";
  run.server_caps = {"publisher-confirms", "tls"};
  run.command_line = "firemq-conform fire://broker.example:5673";
  run.cases = {make_case("lifecycle.hello.ok", "lifecycle", Verdict::pass),
               make_case("lifecycle.hello.bad-credentials", "lifecycle", Verdict::fail),
               make_case("lifecycle.tls.only", "lifecycle", Verdict::skipped),
               make_case("queues.declare.timeout", "queues", Verdict::error),
               make_case("queues.declare.known", "queues", Verdict::expected_fail),
               make_case("queues.declare.fixed", "queues", Verdict::unexpected_pass)};
  run.cases[0].requirements = {"R-hello"};
  run.cases[1].requirements = {"R-hello", "R-auth"};
  run.cases[1].failed_step = 2;
  run.cases[1].failed_step_text = R"({"expect":"close","code":403})";
  run.cases[1].transcript = {line("sent", "hello", R"({"user":"alice"})"),
                             line("received", "welcome", R"({"server":"FireMQ"})")};
  run.requirements = {{"R-hello", "hello", "MUST", "Hello first."},
                      {"R-queue", "queues", "MUST", "Queues exist.", "No test can see a queue <here>."},
                      {"R-auth", "hello", "MUST", "Refuse bad credentials."}};
  return run;
}

RunResult run_of(std::vector<Verdict> verdicts) {
  RunResult run;
  int i = 0;
  for (Verdict v : verdicts) run.cases.push_back(make_case("case." + std::to_string(i++), "g", v));
  return run;
}

std::size_t count_of(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++n;
  return n;
}

// The text of the first element <tag ...>...</tag> whose start tag contains marker.
std::string element_containing(const std::string& xml, const std::string& marker, const std::string& tag) {
  const auto at = xml.find(marker);
  if (at == std::string::npos) return "";
  const auto start = xml.rfind("<" + tag, at);
  const auto end = xml.find("</" + tag + ">", at);
  if (start == std::string::npos || end == std::string::npos) return "";
  return xml.substr(start, end - start);
}

// ===== RunResult =====

TEST(RunResult, CountsIncludeEveryVerdictEvenWhenZero) {
  const auto counts = run_of({Verdict::pass, Verdict::pass, Verdict::fail}).counts();
  ASSERT_EQ(counts.size(), 6u);
  EXPECT_EQ(counts.at(Verdict::pass), 2);
  EXPECT_EQ(counts.at(Verdict::fail), 1);
  EXPECT_EQ(counts.at(Verdict::unexpected_pass), 0);
}

TEST(RunResult, PassesWhenNothingUnexpectedHappened) {
  EXPECT_TRUE(run_of({Verdict::pass, Verdict::skipped, Verdict::expected_fail}).passed());
  EXPECT_TRUE(run_of({Verdict::expected_fail}).passed());
}

TEST(RunResult, RunWithNoExecutedCaseDoesNotPass) {
  EXPECT_FALSE(RunResult{}.passed());
  EXPECT_FALSE(run_of({Verdict::skipped, Verdict::skipped}).passed());
}

TEST(RunResult, FailOrErrorFailsTheRun) {
  EXPECT_FALSE(run_of({Verdict::pass, Verdict::fail}).passed());
  EXPECT_FALSE(run_of({Verdict::pass, Verdict::error}).passed());
}

TEST(RunResult, UnexpectedPassFailsTheRun) { EXPECT_FALSE(run_of({Verdict::pass, Verdict::unexpected_pass}).passed()); }

TEST(RunResult, UncoveredRequirementsAreListed) {
  RunResult run = sample_run();
  run.requirements.push_back({"R-zeta", "", "MAY", ""});
  run.requirements.insert(run.requirements.begin(), Requirement{"R-alpha", "", "MAY", ""});
  EXPECT_EQ(run.uncovered_requirements(), (std::vector<std::string>{"R-alpha", "R-queue", "R-zeta"}));
}

TEST(RunResult, RequirementOfASkippedCaseCountsAsCovered) {
  RunResult run = run_of({Verdict::skipped});
  run.cases[0].requirements = {"R-1"};
  run.requirements = {{"R-1", "", "MUST", ""}};
  EXPECT_TRUE(run.uncovered_requirements().empty());
}

TEST(RunResult, MonitorRulesCountAsCoveredOnceACaseRan) {
  RunResult run = sample_run();
  run.monitor_rules = {"R-queue"};
  EXPECT_TRUE(run.uncovered_requirements().empty());
  run.cases.clear();
  EXPECT_EQ(run.uncovered_requirements(), (std::vector<std::string>{"R-hello", "R-queue", "R-auth"}));
}

TEST(RunResult, VerdictNamesAreHyphenated) {
  EXPECT_STREQ(verdict_name(Verdict::pass), "pass");
  EXPECT_STREQ(verdict_name(Verdict::skipped), "skipped");
  EXPECT_STREQ(verdict_name(Verdict::expected_fail), "expected-fail");
  EXPECT_STREQ(verdict_name(Verdict::unexpected_pass), "unexpected-pass");
}

// ===== report.json =====

TEST(JsonReport, JsonHasEveryCase) {
  const json j = json::parse(report_json(sample_run()));
  EXPECT_EQ(j["format"], "firemq-conform-report");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["passed"], false);
  ASSERT_EQ(j["cases"].size(), 6u);
  EXPECT_EQ(j["cases"][1]["id"], "lifecycle.hello.bad-credentials");
  EXPECT_EQ(j["cases"][1]["verdict"], "fail");
  EXPECT_EQ(j["cases"][5]["verdict"], "unexpected-pass");
  EXPECT_EQ(j["cases"][1]["spec"]["quote"], "The server MUST refuse a hello with bad credentials.");
  EXPECT_EQ(j["cases"][1]["failed_step"], 2);
  EXPECT_EQ(j["cases"][0]["failed_step"], -1);
}

TEST(JsonReport, JsonHasRunFactsCountsAndCoverage) {
  const json j = json::parse(report_json(sample_run()));
  EXPECT_EQ(j["run_id"], "20261130T071903Z-4821");
  EXPECT_EQ(j["server"]["caps"], json({"publisher-confirms", "tls"}));
  EXPECT_EQ(j["counts"], json({{"pass", 1},
                               {"fail", 1},
                               {"skipped", 1},
                               {"error", 1},
                               {"expected_fail", 1},
                               {"unexpected_pass", 1},
                               {"total", 6}}));
  EXPECT_EQ(j["requirements"], json({{"total", 3},
                                     {"covered", 2},
                                     {"uncovered", {"R-queue"}},
                                     {"monitor_rules", json::array()},
                                     {"untested_because", {{"R-queue", "No test can see a queue <here>."}}}}));
}

TEST(JsonReport, JsonHasEachCasesMonitorViolationsWithTheFramesAroundThem) {
  RunResult run = sample_run();
  MonitorViolation v;
  v.rule = "credit.limit";
  v.spec = {"Consuming / credit", "The server sends at most as many deliver frames as the credit granted so far."};
  v.connection = "main";
  v.message = "the server sent deliver 2 to sub 1 with credit 1 granted so far";
  v.context = {line("received", "deliver", R"({"sub":1,"tag":2})")};
  run.cases[1].violations = {v};
  const json j = json::parse(report_json(run));
  EXPECT_EQ(j["cases"][0]["violations"], json::array());
  const json& got = j["cases"][1]["violations"][0];
  EXPECT_EQ(got["rule"], "credit.limit");
  EXPECT_EQ(got["spec"]["quote"], v.spec.quote);
  EXPECT_EQ(got["context"][0]["header"], json::parse(R"({"sub":1,"tag":2})"));
  EXPECT_NE(report_html(run).find("Wire monitor: <code>credit.limit</code>"), std::string::npos);
}

TEST(JsonReport, JsonKeysFollowTheDocumentedOrder) {
  const std::string text = report_json(sample_run());
  EXPECT_LT(text.find("\"format\""), text.find("\"version\""));
  EXPECT_LT(text.find("\"version\""), text.find("\"run_id\""));
  EXPECT_LT(text.find("\"counts\""), text.find("\"cases\""));
}

TEST(JsonReport, JsonParsesValidHeadersAndKeepsOthersAsText) {
  RunResult run = sample_run();
  run.cases[0].transcript = {line("sent", "hello", R"({"user":"alice","n":[1,2]})"), line("received", "", "not json {"),
                             line("note", "", "42")};
  const json t = json::parse(report_json(run))["cases"][0]["transcript"];
  EXPECT_EQ(t[0]["header"], json::parse(R"({"user":"alice","n":[1,2]})"));
  EXPECT_EQ(t[1]["header"], "not json {");
  EXPECT_EQ(t[2]["header"], "42");  // a note is text, even when it parses
  EXPECT_EQ(t[0]["connection"], "main");
  EXPECT_EQ(t[0]["at_ms"], 1.5);
}

TEST(JsonReport, JsonKeepsAPathologicallyNestedHeaderAsText) {
  RunResult run = sample_run();
  const std::string deep = std::string(10000, '[') + std::string(10000, ']');
  run.cases[0].transcript = {line("received", "x", deep)};
  const json j = json::parse(report_json(run));
  EXPECT_EQ(j["cases"][0]["transcript"][0]["header"], deep);
}

TEST(JsonReport, JsonSurvivesInvalidUtf8FromThePeer) {
  RunResult run = sample_run();
  run.cases[1].message = "got \xff\xfe and \x01";
  run.server_name = "bad\xc3";
  std::string text;
  ASSERT_NO_THROW(text = report_json(run));
  const json j = json::parse(text);
  EXPECT_EQ(j["cases"][1]["message"], "got \\xff\\xfe and \x01");
  EXPECT_EQ(j["server"]["name"], "bad\\xc3");
}

// ===== junit.xml =====

TEST(JunitReport, JunitHasOneSuitePerGroupWithCounts) {
  const std::string xml = junit_xml(sample_run());
  EXPECT_EQ(count_of(xml, "<testsuite "), 2u);
  EXPECT_NE(xml.find(R"(<testsuite name="lifecycle" tests="3" failures="1" errors="0" skipped="1")"),
            std::string::npos);
  EXPECT_NE(xml.find(R"(<testsuite name="queues" tests="3" failures="1" errors="1" skipped="0")"), std::string::npos);
  EXPECT_NE(xml.find(R"(<testcase name="lifecycle.hello.ok" classname="firemq.conform.lifecycle" time="0.013")"),
            std::string::npos);
  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>", 0), 0u);
}

TEST(JunitReport, TheTransportIsPartOfTheClassNameAndOfTheJson) {
  RunResult run = sample_run();
  run.cases[0].transport = "wss";
  EXPECT_NE(junit_xml(run).find(R"(<testcase name="lifecycle.hello.ok" classname="firemq.conform.wss.lifecycle")"),
            std::string::npos);
  const json j = json::parse(report_json(run));
  EXPECT_EQ(j["cases"][0]["transport"], "wss");
  EXPECT_EQ(j["cases"][1]["transport"], "");
}

TEST(JunitReport, JunitMarksFailuresWithTheSpecSentence) {
  const std::string xml = junit_xml(sample_run());
  const std::string failure = element_containing(xml, "message of lifecycle.hello.bad-credentials", "failure");
  ASSERT_FALSE(failure.empty()) << xml;
  EXPECT_NE(failure.find("[MUST]"), std::string::npos);
  EXPECT_NE(failure.find("Connection lifecycle / hello"), std::string::npos);
  EXPECT_NE(failure.find("\"The server MUST refuse a hello with bad credentials.\""), std::string::npos);
  EXPECT_NE(failure.find("Failed step 2: {\"expect\":\"close\",\"code\":403}"), std::string::npos);
  EXPECT_NE(failure.find("sent  hello  {\"user\":\"alice\"}"), std::string::npos);
}

TEST(JunitReport, JunitMarksUnexpectedPassAsAFailure) {
  const std::string xml = junit_xml(sample_run());
  const std::string failure = element_containing(xml, "type=\"unexpected-pass\"", "failure");
  EXPECT_NE(failure.find("<failure message=\"unexpected pass: listed in the known-failures file, but passed: "
                         "message of queues.declare.fixed\""),
            std::string::npos)
      << xml;
}

TEST(JunitReport, JunitMarksErrorsAndSkips) {
  const std::string xml = junit_xml(sample_run());
  EXPECT_NE(xml.find("<error message=\"message of queues.declare.timeout\" type=\"error\">"), std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"message of lifecycle.tls.only\"/>"), std::string::npos);
}

TEST(JunitReport, JunitExpectedFailPassesWithANote) {
  const std::string xml = junit_xml(sample_run());
  const std::string testcase = element_containing(xml, "name=\"queues.declare.known\"", "testcase");
  EXPECT_NE(testcase.find("<system-out>expected failure (known-failures file)"), std::string::npos) << xml;
  EXPECT_EQ(testcase.find("<failure"), std::string::npos);
}

TEST(JunitReport, JunitEscapesMarkupAndIllegalControlCharacters) {
  RunResult run = sample_run();
  run.cases[1].message = "a<b>&\"c\"\x01\x1b[31m\xff";
  run.cases[1].transcript = {line("received", "close", "{\"text\":\"</failure>\\u0000\"}\x0b")};
  const std::string xml = junit_xml(run);
  EXPECT_NE(xml.find("message=\"a&lt;b&gt;&amp;&quot;c&quot;\\x01\\x1b[31m\\xff\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("&lt;/failure&gt;"), std::string::npos);
  EXPECT_NE(xml.find("\\x0b"), std::string::npos);
  for (char c : xml) {
    const auto byte = static_cast<unsigned char>(c);
    EXPECT_TRUE(byte >= 0x20 || c == '\n' || c == '\t') << "raw byte " << int{byte};
  }
}

TEST(JunitReport, JunitKeepsLineBreaksInAttributes) {
  RunResult run = run_of({Verdict::fail});
  run.cases[0].message = "line one\nline two";
  EXPECT_NE(junit_xml(run).find("message=\"line one line two\""), std::string::npos);
}

TEST(JunitReport, JunitHasTargetAndServerProperties) {
  const std::string xml = junit_xml(sample_run());
  EXPECT_NE(xml.find(R"(<property name="target" value="fire://broker.example:5673"/>)"), std::string::npos);
  EXPECT_NE(xml.find(R"(<property name="server.name" value="FireMQ"/>)"), std::string::npos);
  EXPECT_NE(xml.find(R"(<property name="server.caps" value="publisher-confirms,tls"/>)"), std::string::npos);
}

TEST(JunitReport, JunitOfAnEmptyRunStillNamesTheTarget) {
  RunResult run;
  run.target = "fire://h";
  const std::string xml = junit_xml(run);
  EXPECT_NE(xml.find("tests=\"0\""), std::string::npos);
  EXPECT_NE(xml.find("value=\"fire://h\""), std::string::npos);
}

// ===== report.html =====

TEST(HtmlReport, HtmlEscapesPeerBytes) {
  RunResult run = sample_run();
  run.server_name = "<script>alert(1)</script>";
  run.cases[1].message = "got <img src=x onerror=alert(1)> & 'quotes' \x07";
  run.cases[1].transcript = {line("received", "close", R"({"text":"<b>bold</b>"})")};
  run.cases[1].transcript[0].payload_preview = "</td><td>";
  run.cases[1].transcript[0].payload_size = 9;
  const std::string html = report_html(run);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>bold"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("got &lt;img src=x onerror=alert(1)&gt; &amp; &#39;quotes&#39; \\x07"), std::string::npos);
  EXPECT_NE(html.find("&lt;/td&gt;&lt;td&gt;"), std::string::npos);
}

TEST(HtmlReport, HtmlShowsTheVerdictOfTheRun) {
  EXPECT_NE(report_html(sample_run()).find(">FAILED<"), std::string::npos);
  EXPECT_NE(report_html(run_of({Verdict::pass})).find(">PASSED<"), std::string::npos);
  EXPECT_NE(report_html(run_of({Verdict::skipped})).find("No case was executed"), std::string::npos);
}

TEST(HtmlReport, HtmlShowsFailuresBeforeAllCases) {
  const std::string html = report_html(sample_run());
  const auto failures = html.find("id=\"failures\"");
  const auto all = html.find("id=\"cases\"");
  ASSERT_NE(failures, std::string::npos);
  ASSERT_NE(all, std::string::npos);
  EXPECT_LT(failures, all);
  // In the failures section: fail, then unexpected pass, then error; never a passing case.
  const std::string section = html.substr(failures, all - failures);
  EXPECT_LT(section.find("lifecycle.hello.bad-credentials"), section.find("queues.declare.fixed"));
  EXPECT_LT(section.find("queues.declare.fixed"), section.find("queues.declare.timeout"));
  EXPECT_EQ(section.find("lifecycle.hello.ok"), std::string::npos);
  EXPECT_NE(section.find("<blockquote>The server MUST refuse a hello with bad credentials.</blockquote>"),
            std::string::npos);
  EXPECT_NE(section.find("<table class=\"transcript\">"), std::string::npos);
}

TEST(HtmlReport, HtmlGroupsAllCasesWithExpandableTranscripts) {
  const std::string html = report_html(sample_run());
  const std::string all = html.substr(html.find("id=\"cases\""));
  EXPECT_EQ(count_of(all, "<details class=\"case "), 6u);
  EXPECT_LT(all.find("<h3>lifecycle "), all.find("<h3>queues "));
  EXPECT_NE(all.find("class=\"badge v-expected-fail\""), std::string::npos);
}

TEST(HtmlReport, HtmlIsSelfContained) {
  const std::string html = report_html(sample_run());
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);
}

TEST(HtmlReport, HtmlListsUncoveredRequirementsInDetails) {
  const std::string html = report_html(sample_run());
  EXPECT_NE(html.find("2/3 covered"), std::string::npos);
  EXPECT_NE(html.find("<details><summary>1 uncovered requirements</summary>"), std::string::npos);
  EXPECT_NE(html.find("<code>R-queue</code>"), std::string::npos);
  EXPECT_NE(html.find("<td>No test can see a queue &lt;here&gt;.</td>"), std::string::npos);  // the catalog's reason
}

TEST(HtmlReport, HtmlCapsLongTranscripts) {
  RunResult run = run_of({Verdict::fail});
  run.cases[0].transcript.assign(1000, line("sent", "publish", "{}"));
  const std::string html = report_html(run);
  EXPECT_NE(html.find("600 more lines in report.json"), std::string::npos);
}

// ===== summary.md =====

TEST(MarkdownSummary, MarkdownTitleHasTheVerdictAndCounts) {
  EXPECT_EQ(summary_markdown(sample_run()).rfind("## ❌ FireMQ conformance: failed — 6 cases: 1 pass, 1 fail", 0), 0u);
  EXPECT_EQ(summary_markdown(run_of({Verdict::pass})).rfind("## ✅", 0), 0u);
}

TEST(MarkdownSummary, MarkdownHasACountsTable) {
  const std::string md = summary_markdown(sample_run());
  EXPECT_NE(md.find("| pass | fail | skipped | error | expected-fail | unexpected-pass | total |\n"
                    "|---:|---:|---:|---:|---:|---:|---:|\n"
                    "| 1 | 1 | 1 | 1 | 1 | 1 | 6 |\n"),
            std::string::npos);
}

TEST(MarkdownSummary, MarkdownListsFailuresFirst) {
  const std::string md = summary_markdown(sample_run());
  const auto failures = md.find("### Failures (3)");
  ASSERT_NE(failures, std::string::npos);
  EXPECT_LT(failures, md.find("### Requirement coverage"));
  EXPECT_NE(md.find("**`lifecycle.hello.bad-credentials`** — Title of lifecycle.hello.bad-credentials — MUST — "
                    "Connection lifecycle / hello\n\n"
                    "> The server MUST refuse a hello with bad credentials.\n\n"
                    "message of lifecycle.hello.bad-credentials\n"),
            std::string::npos)
      << md;
  EXPECT_LT(md.find("`lifecycle.hello.bad-credentials`"), md.find("`queues.declare.fixed`"));
  EXPECT_LT(md.find("`queues.declare.fixed`"), md.find("`queues.declare.timeout`"));
  EXPECT_EQ(md.find("`lifecycle.hello.ok`"), std::string::npos);
}

TEST(MarkdownSummary, MarkdownCapsFailuresAtFifty) {
  const RunResult run = run_of(std::vector<Verdict>(60, Verdict::fail));
  const std::string md = summary_markdown(run);
  EXPECT_NE(md.find("`case.49`"), std::string::npos);
  EXPECT_EQ(md.find("`case.50`"), std::string::npos);
  EXPECT_NE(md.find("… and 10 more"), std::string::npos);
}

TEST(MarkdownSummary, MarkdownEscapesPeerText) {
  RunResult run = run_of({Verdict::fail});
  run.cases[0].message = "a|b `code` <img> *x*\nsecond line";
  run.cases[0].id = "weird`id";
  const std::string md = summary_markdown(run);
  EXPECT_NE(md.find("a\\|b \\`code\\` \\<img\\> \\*x\\* second line"), std::string::npos) << md;
  EXPECT_NE(md.find("``weird`id``"), std::string::npos) << md;
}

TEST(MarkdownSummary, MarkdownListsUncoveredRequirements) {
  RunResult run = sample_run();
  for (int i = 0; i < 60; ++i) run.requirements.push_back({"R-x" + std::to_string(i), "", "MAY", ""});
  const std::string md = summary_markdown(run);
  EXPECT_NE(md.find("2/63 covered. Uncovered: `R-queue`, `R-x0`"), std::string::npos) << md;
  EXPECT_NE(md.find("`R-x48` … and 11 more"), std::string::npos) << md;
  EXPECT_EQ(md.find("`R-x49`"), std::string::npos);
}

// ===== console =====

TEST(ConsoleSummary, ConsoleSummaryHasCountsCoverageFailuresAndVerdict) {
  const std::string text = console_summary(sample_run());
  EXPECT_EQ(text, "firemq-conform: 6 cases: 1 pass, 1 fail, 1 skipped, 1 error, 1 expected-fail, 1 unexpected-pass "
                  "(3.2 s)\n"
                  "requirements: 2/3 covered\n"
                  "FAILED lifecycle.hello.bad-credentials: message of lifecycle.hello.bad-credentials\n"
                  "UNEXPECTED-PASS queues.declare.fixed: listed in the known-failures file, but passed: message of "
                  "queues.declare.fixed\n"
                  "ERROR queues.declare.timeout: message of queues.declare.timeout\n"
                  "FAILED\n");
}

TEST(ConsoleSummary, ConsoleSummaryEndsWithPassedForAGoodRun) {
  const std::string text = console_summary(run_of({Verdict::pass, Verdict::skipped}));
  EXPECT_EQ(text.substr(text.size() - 7), "PASSED\n");
}

TEST(ConsoleSummary, ConsoleSummarySaysWhyARunWithNothingExecutedFails) {
  EXPECT_NE(console_summary(run_of({Verdict::skipped})).find("no case was executed\nFAILED\n"), std::string::npos);
}

TEST(ConsoleSummary, ConsoleSummaryCapsFailuresAtTwenty) {
  const std::string text = console_summary(run_of(std::vector<Verdict>(25, Verdict::fail)));
  EXPECT_EQ(count_of(text, "FAILED case."), 20u);
  EXPECT_NE(text.find("... and 5 more\n"), std::string::npos);
}

TEST(ConsoleSummary, ConsoleSummaryKeepsTerminalEscapesOut) {
  RunResult run = run_of({Verdict::fail});
  run.cases[0].message = "evil \x1b]0;title\x07 \xc2\x9b"
                         "31m\nnext";
  const std::string text = console_summary(run);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_NE(text.find("evil \\x1b]0;title\\x07 \\xc2\\x9b31m next\n"), std::string::npos) << text;
}

// ===== files =====

class WriteReports : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("firemq-reports-test-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST_F(WriteReports, WritesTheFourReportsIntoANewDirectory) {
  const RunResult run = sample_run();
  EXPECT_EQ(write_reports(run, dir_ / "nested" / run.run_id), "");
  const auto out = dir_ / "nested" / run.run_id;
  EXPECT_EQ(read_file(out / "report.json"), report_json(run));
  EXPECT_EQ(read_file(out / "junit.xml"), junit_xml(run));
  EXPECT_EQ(read_file(out / "report.html"), report_html(run));
  EXPECT_EQ(read_file(out / "summary.md"), summary_markdown(run));
}

TEST_F(WriteReports, ReturnsAnErrorInsteadOfThrowing) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "a-file") << "x";
  std::string error;
  EXPECT_NO_THROW(error = write_reports(sample_run(), dir_ / "a-file" / "reports"));
  EXPECT_NE(error.find("a-file"), std::string::npos) << error;
}

}  // namespace
}  // namespace firemq::conform
