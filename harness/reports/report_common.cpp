// What the report writers share (report_common.h): text cleaning, numbers, facts about a run.
#include "harness/reports/report_common.h"

#include <charconv>
#include <cmath>
#include <system_error>

namespace firemq::conform::report {
namespace {

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

std::string unexpected_pass_text(const CaseResult& c) {
  std::string s = "listed in the known-failures file, but passed";
  if (!c.message.empty()) s += ": " + c.message;
  return s;
}

}  // namespace

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

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

std::string fixed(double v, int precision) {
  if (!std::isfinite(v)) v = 0;
  char buf[512];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, precision);
  if (ec != std::errc{}) return "0";
  return std::string(buf, end);
}

std::string seconds(double ms) { return fixed(std::max(ms, 0.0) / 1000, 3); }

std::string human_duration(double ms) {
  if (!std::isfinite(ms) || ms < 0) ms = 0;
  if (ms < 1000) return fixed(ms, 0) + " ms";
  return fixed(ms / 1000, 1) + " s";
}

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

std::string shown_message(const CaseResult& c) {
  if (c.verdict == Verdict::unexpected_pass) return unexpected_pass_text(c);
  if (c.message.empty() && is_problem(c.verdict)) return "(no message)";
  return c.message;
}

}  // namespace firemq::conform::report
