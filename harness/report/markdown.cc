// Markdown for a CI step summary (GitHub's $GITHUB_STEP_SUMMARY, a GitLab
// job's artifact): a heading with the verdict, the run's properties, one
// table row per verdict, then each failure's body in a code block.
#include <fmt/format.h>

#include "harness/report/report.h"

namespace collcheck {

namespace {
std::string cell(std::string s) {
  for (auto& ch : s)
    if (ch == '|' || ch == '\n') ch = ch == '|' ? '/' : ' ';
  return s;
}
}  // namespace

std::string render_markdown(const Report& r) {
  using S = ReportCase::Status;
  const size_t bad = r.count(S::Failed) + r.count(S::Error);
  std::string t = fmt::format("### {} — {}\n\n", r.suite, bad ? fmt::format("{} FAILED", bad) : std::string("passed"));
  for (const auto& [k, v] : r.properties) t += fmt::format("- {}: `{}`\n", k, v);
  t += fmt::format("\n{} verdicts: {} passed, {} failed, {} errors, {} skipped ({:.1f} s)\n\n", r.cases.size(),
                   r.count(S::Passed), r.count(S::Failed), r.count(S::Error), r.count(S::Skipped), r.seconds);
  t += "| verdict | check | detail |\n|---|---|---|\n";
  for (const auto& c : r.cases) {
    const char* word = c.status == S::Passed ? "pass" : c.status == S::Failed ? "**FAIL**" : c.status == S::Error ? "**ERROR**" : "skip";
    t += fmt::format("| {} | {} | {} |\n", word, cell(c.name), cell(c.message));
  }
  for (const auto& c : r.cases) {
    if ((c.status != S::Failed && c.status != S::Error) || c.detail.empty()) continue;
    t += fmt::format("\n<details><summary>{}</summary>\n\n```\n{}\n```\n</details>\n", cell(c.name), c.detail);
  }
  return t;
}

}  // namespace collcheck
