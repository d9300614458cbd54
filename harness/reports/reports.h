// The report writers of the conformance harness: one RunResult rendered for each of its readers.
//   report.json  machines (stable shape, "format": "firemq-conform-report", "version": 1)
//   junit.xml    CI test tabs (one testsuite per group, one testcase per case)
//   report.html  a person (one self-contained page, failures first)
//   summary.md   a GitHub Actions step summary
// and the few lines printed at the end of a run. Everything that came from the peer is escaped for the
// format it lands in; none of the renderers runs anything or reads anything but the RunResult.
#pragma once

#include <filesystem>
#include <string>

#include "harness/model/run_result.h"

namespace firemq::conform {

std::string report_json(const RunResult& run);       // pretty-printed JSON
std::string junit_xml(const RunResult& run);         // JUnit XML
std::string report_html(const RunResult& run);       // one self-contained HTML page
std::string summary_markdown(const RunResult& run);  // GitHub-flavoured Markdown, short
std::string console_summary(const RunResult& run);   // a few lines, ends with "PASSED" or "FAILED" and "\n"

// Writes report.json, junit.xml, report.html and summary.md into dir, creating it if missing. Returns an
// error message, or "" on success. Never throws.
std::string write_reports(const RunResult& run, const std::filesystem::path& dir);

}  // namespace firemq::conform
