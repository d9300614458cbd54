// What the report writers (report_json.cpp, report_junit.cpp, report_html.cpp, report_markdown.cpp and the
// console lines in reports.cpp) share: text cleaning, number formatting, and the facts about a run every report
// shows. Internal to the writers; callers use reports.h.
//
// Peer bytes (headers, payload previews, messages, server names) can be anything, including invalid UTF-8,
// control characters and markup. Every string therefore passes through clean() before it is escaped for
// its format: invalid UTF-8 and control characters become "\xNN" text, the convention payload_preview
// already uses, so every report stays well-formed and no escape sequence reaches a terminal.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "harness/model/run_result.h"

namespace firemq::conform::report {

// A report stays readable whatever a case logged.
constexpr std::size_t kMessageChars = 400;  // messages in Markdown and attributes

// ===== Text cleaning =====

enum class Clean {
  utf8,      // escape invalid UTF-8 only (JSON escapes control characters itself)
  text,      // also control characters other than tab, newline and carriage return
  one_line,  // also turn tab, newline and carriage return into spaces
};

std::string clean(std::string_view s, Clean mode);

// Cuts valid UTF-8 at a character boundary, marking the cut.
std::string truncate(std::string s, std::size_t max_bytes);

// clean(s, Clean::one_line), truncated.
std::string one_line(std::string_view s, std::size_t max_bytes);

std::string join(const std::vector<std::string>& items, std::string_view separator);

// ===== Numbers: locale-independent, finite =====

std::string fixed(double v, int precision);
std::string seconds(double ms);         // "0.850"
std::string human_duration(double ms);  // "850 ms", "3.2 s": for people

// ===== Facts about the run every report uses =====

inline constexpr Verdict kVerdicts[] = {Verdict::pass,  Verdict::fail,          Verdict::skipped,
                                        Verdict::error, Verdict::expected_fail, Verdict::unexpected_pass};

// The verdicts that fail a run, in the order reports list them.
inline constexpr Verdict kProblemVerdicts[] = {Verdict::fail, Verdict::unexpected_pass, Verdict::error};

inline bool is_problem(Verdict v) { return std::ranges::find(kProblemVerdicts, v) != std::end(kProblemVerdicts); }

// Failing cases grouped by verdict (fail, unexpected pass, error), each group in case order.
std::vector<const CaseResult*> problems(const RunResult& run);

std::string group_name(const CaseResult& c);

struct Group {
  std::string name;
  std::vector<const CaseResult*> cases;
};

// Groups in the order they first appear, so reports follow the case files.
std::vector<Group> groups(const RunResult& run);

int count_of(const std::vector<const CaseResult*>& cases, Verdict v);
double total_ms(const std::vector<const CaseResult*>& cases);

struct Coverage {
  std::size_t total = 0;
  std::size_t covered = 0;
  std::vector<std::string> uncovered;
};

Coverage coverage(const RunResult& run);

// The server's name and version, or why there is none.
std::string server_text(const RunResult& run);

// "142 cases: 140 pass, 0 fail, 2 skipped, 0 error, 0 expected-fail, 0 unexpected-pass"
std::string counts_text(const RunResult& run);

// The message a report shows for a case, never empty for a problem.
std::string shown_message(const CaseResult& c);

}  // namespace firemq::conform::report
