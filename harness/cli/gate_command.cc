// collcheck gate: one command for a CI job (issue 14). Correctness: verify
// over a time budget plus the fault table, for the implementation under test.
// Performance: two implementations timed side by side in one sweep, or two
// sweep --json files, compared row by row (perf_gate.h).
// Either way: JUnit, a Markdown summary, and the exit code (0 pass, 1 fail,
// 2 bad input).
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

#include "harness/cli/commands.h"
#include "harness/model/atomic_file.h"
#include "properties/gate_job.h"

namespace collcheck::cli {

void add_gate(CLI::App& app, GateFlags& f) {
  auto* g = app.add_subcommand("gate", "Gate a change in CI: --impl (correctness: verify over --budget and the fault "
                                       "table), --baseline-impl/--candidate-impl (performance: both timed side by "
                                       "side) or --baseline/--candidate (performance: sweep --json files); JUnit, "
                                       "Markdown, exit code");
  g->add_option("--impl", f.job.impl, "correctness: the implementation under test, e.g. plugin:./build/libnew.so");
  g->add_option("--against", f.job.against, "correctness: peers to compare with (default: the implementation's default)");
  g->add_option("--budget", f.job.budget_s,
                "correctness: seconds in all: verify draws cases for half of it (shrinking a failure and its replays "
                "stop at the end of it), the fault table has the rest; a row past the end is not run (exit 3)")
      ->capture_default_str();
  add_progress_flag(g, f.progress);
  g->add_option("--timeout", f.job.timeout_s, "correctness: the deadline of each all-reduce call, in seconds")
      ->capture_default_str();
  g->add_option("--baseline", f.job.baseline, "performance: sweep --json of the baseline");
  g->add_option("--candidate", f.job.candidate, "performance: sweep --json of the candidate");
  g->add_option("--baseline-impl", f.job.baseline_impl,
                "performance side by side: the baseline implementation, timed in the same sweep as the candidate "
                "(round by round: sound on a busy machine)");
  g->add_option("--candidate-impl", f.job.candidate_impl, "performance side by side: the candidate implementation");
  SweepJob& s = f.job.sweep;
  s.min_bytes = "64K", s.max_bytes = "1M", s.o.factor = 4, s.o.iters = 50, s.o.reps = 12;
  g->add_option("-b,--minbytes", s.min_bytes, "side by side: smallest size in bytes (K/M/G)")->capture_default_str();
  g->add_option("-e,--maxbytes", s.max_bytes, "side by side: largest size in bytes (K/M/G)")->capture_default_str();
  g->add_option("-f,--stepfactor", s.o.factor, "side by side: size factor per step")->capture_default_str();
  g->add_option("-n,--iters", s.o.iters, "side by side: calls per sample")->capture_default_str();
  g->add_option("--reps", s.o.reps, "side by side: rounds, one sample of each row of both per round (even: each goes first as often)")
      ->capture_default_str();
  g->add_option("-d,--datatype", s.dtypes, "side by side: dtype, comma list, or all")->capture_default_str();
  g->add_option("-o,--op", s.ops, "side by side: op, comma list, or all")->capture_default_str();
  g->add_option("--ranks", s.o.ranks, "side by side: world size (ranks as threads)")->capture_default_str();
  g->add_option("--json", f.job.sweep_json, "side by side: also write the sweep's rows (both implementations) as JSON here");
  g->add_option("--max-regression", f.job.max_regression, "performance: the largest busbw drop allowed, as 5% or 0.05")
      ->capture_default_str();
  g->add_option("--alpha", f.job.alpha, "performance: significance over all rows (Bonferroni)")->capture_default_str();
  g->add_option("--min-samples", f.job.min_samples, "performance: busbw samples a row needs (sweep --reps)")
      ->capture_default_str();
  g->add_option("--markdown", f.markdown,
                "write the Markdown summary here (default: appended to $GITHUB_STEP_SUMMARY when it is set)");
  add_junit_flag(g, f.report, "write JUnit XML here");
  add_report_flag(g, f.report);
}

namespace {

// The summary, to --markdown or appended to $GITHUB_STEP_SUMMARY. One that
// cannot be written is an error (exit 5) unless the verdict already failed:
// the verdict stands, the summary is never lost silently.
int write_markdown(const GateFlags& f, const std::string& md, int code) {
  const char* summary = std::getenv("GITHUB_STEP_SUMMARY");
  try {
    if (!f.markdown.empty()) {
      write_file_atomically(f.markdown, md);
    } else if (summary && *summary) {
      append_to_file(summary, md);
    }
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "collcheck: error: %s: %s\n", f.markdown.empty() ? "$GITHUB_STEP_SUMMARY" : "--markdown", e.what());
    return code == 0 ? kExitOutputLost : code;
  }
  return code;
}

}  // namespace

int run_gate_command(GateFlags& f, const Session& session) {
  check_gate(f.job);
  for (const auto& [path, flag] : {std::pair{f.markdown, "--markdown"},
                                   std::pair{f.job.sweep_json, "--json"}})
    if (!path.empty()) {
      try {
        check_report_path(path, flag);
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
    }
  f.job.version = COLLCHECK_VERSION;
  if (!f.job.impl.empty()) add_progress_sink(f.report, session, f.progress, "gate", "cases");  // a long gate says it is alive
  Report rep;
  std::string markdown;
  const int code = run_gate_job(f.job, session, *f.report.events, rep, markdown);
  return finish_reports(f.report, rep, write_markdown(f, markdown, code));
}

}  // namespace collcheck::cli
