// Plain text: a header, one line per verdict, a count, then each failure's
// body indented below its name.
#include <fmt/format.h>

#include "harness/report/report.h"

namespace collcheck {

std::string render_text(const Report& r) {
  using S = ReportCase::Status;
  std::string t = r.suite + "\n";
  for (const auto& [k, v] : r.properties) t += fmt::format("  {}: {}\n", k, v);
  auto word = [](S s) {
    switch (s) {
      case S::Passed: return "PASS ";
      case S::Failed: return "FAIL ";
      case S::Error: return "ERROR";
      case S::Skipped: return "SKIP ";
    }
    return "?    ";
  };
  for (const auto& c : r.cases)
    t += fmt::format("{} {}{}\n", word(c.status), c.name, c.message.empty() ? "" : ": " + c.message);
  t += fmt::format("{} verdicts: {} passed, {} failed, {} errors, {} skipped ({:.1f} s)\n", r.cases.size(),
                   r.count(S::Passed), r.count(S::Failed), r.count(S::Error), r.count(S::Skipped), r.seconds);
  for (const auto& c : r.cases) {
    if ((c.status != S::Failed && c.status != S::Error) || c.detail.empty()) continue;
    t += fmt::format("\n{}:\n", c.name);
    size_t start = 0;
    while (start < c.detail.size()) {
      const size_t nl = c.detail.find('\n', start);
      const size_t end = nl == std::string::npos ? c.detail.size() : nl;
      t += "  " + c.detail.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  return t;
}

}  // namespace collcheck
