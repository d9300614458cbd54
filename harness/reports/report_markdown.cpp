// summary.md (reports.h): a short GitHub-flavoured Markdown summary for a CI step (GitHub caps a step summary
// at 1 MiB, hence the limits). Peer text is escaped so that it cannot start a block or break a table.
#include "harness/reports/reports.h"

#include <string_view>

#include "harness/reports/report_common.h"

namespace firemq::conform {
namespace {

using namespace report;  // the writers' shared helpers

constexpr std::size_t kMarkdownFailures = 50;
constexpr std::size_t kMarkdownUncovered = 50;

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
  s += " — " + std::to_string(run.cases.size()) + " cases: " + std::to_string(counts.at(Verdict::pass)) + " pass, " +
       std::to_string(counts.at(Verdict::fail)) + " fail";
  // The rarer verdicts only when they happened, to keep the title short.
  for (Verdict v : {Verdict::skipped, Verdict::error, Verdict::expected_fail, Verdict::unexpected_pass}) {
    if (counts.at(v) > 0) s += ", " + std::to_string(counts.at(v)) + " " + verdict_name(v);
  }
  return s + "\n\n";
}

std::string md_facts(const RunResult& run) {
  std::string s = "Target " + md_code(run.target) + " · server " + md_text(server_text(run), kMessageChars) + " · " +
                  human_duration(run.duration_ms) + " · run " + md_code(run.run_id) + "\n\n";
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

}  // namespace

std::string summary_markdown(const RunResult& run) {
  return md_title(run) + md_facts(run) + md_counts_table(run) + md_failures(run) + md_coverage(run);
}

}  // namespace firemq::conform
