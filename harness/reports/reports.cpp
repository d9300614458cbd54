// The console lines of a run and write_reports (reports.h). Each report has a file of its own:
// report_json.cpp, report_junit.cpp, report_html.cpp, report_markdown.cpp; what they share is report_common.h.
#include "harness/reports/reports.h"

#include <algorithm>
#include <cerrno>
#include <exception>
#include <fstream>
#include <system_error>
#include <utility>

#include "harness/reports/report_common.h"

namespace firemq::conform {
namespace {

using namespace report;  // the writers' shared helpers

constexpr std::size_t kConsoleFailures = 20;
constexpr std::size_t kConsoleMessageChars = 200;

std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return "cannot create " + path.string() + ": " + std::generic_category().message(errno);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return "cannot write " + path.string() + ": " + std::generic_category().message(errno);
  return "";
}

}  // namespace

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
