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
#include "harness/run/perf_gate.h"
#include "harness/run/sweep.h"

namespace collcheck::cli {

void add_gate(CLI::App& app, GateFlags& f) {
  auto* g = app.add_subcommand("gate", "Gate a change in CI: --impl (correctness: verify over --budget and the fault "
                                       "table), --baseline-impl/--candidate-impl (performance: both timed side by "
                                       "side) or --baseline/--candidate (performance: sweep --json files); JUnit, "
                                       "Markdown, exit code");
  g->add_option("--impl", f.impl, "correctness: the implementation under test, e.g. plugin:./build/libnew.so");
  g->add_option("--against", f.against, "correctness: peers to compare with (default: the implementation's default)");
  g->add_option("--budget", f.budget,
                "correctness: seconds in all: verify draws cases for half of it (shrinking a failure and its replays "
                "stop at the end of it), the fault table has the rest; a row past the end is not run (exit 3)")
      ->capture_default_str();
  add_progress_flag(g, f.progress);
  g->add_option("--timeout", f.timeout, "correctness: the deadline of each all-reduce call, in seconds")
      ->capture_default_str();
  g->add_option("--baseline", f.baseline, "performance: sweep --json of the baseline");
  g->add_option("--candidate", f.candidate, "performance: sweep --json of the candidate");
  g->add_option("--baseline-impl", f.baseline_impl,
                "performance side by side: the baseline implementation, timed in the same sweep as the candidate "
                "(round by round: sound on a busy machine)");
  g->add_option("--candidate-impl", f.candidate_impl, "performance side by side: the candidate implementation");
  SweepFlags& s = f.sweep;
  s.job.min_bytes = "64K", s.job.max_bytes = "1M", s.job.o.factor = 4, s.job.o.iters = 50, s.job.o.reps = 12;
  g->add_option("-b,--minbytes", s.job.min_bytes, "side by side: smallest size in bytes (K/M/G)")->capture_default_str();
  g->add_option("-e,--maxbytes", s.job.max_bytes, "side by side: largest size in bytes (K/M/G)")->capture_default_str();
  g->add_option("-f,--stepfactor", s.job.o.factor, "side by side: size factor per step")->capture_default_str();
  g->add_option("-n,--iters", s.job.o.iters, "side by side: calls per sample")->capture_default_str();
  g->add_option("--reps", s.job.o.reps, "side by side: rounds, one sample of each row of both per round (even: each goes first as often)")
      ->capture_default_str();
  g->add_option("-d,--datatype", s.job.dtypes, "side by side: dtype, comma list, or all")->capture_default_str();
  g->add_option("-o,--op", s.job.ops, "side by side: op, comma list, or all")->capture_default_str();
  g->add_option("--ranks", s.job.o.ranks, "side by side: world size (ranks as threads)")->capture_default_str();
  g->add_option("--json", s.json, "side by side: also write the sweep's rows (both implementations) as JSON here");
  g->add_option("--max-regression", f.max_regression, "performance: the largest busbw drop allowed, as 5% or 0.05")
      ->capture_default_str();
  g->add_option("--alpha", f.alpha, "performance: significance over all rows (Bonferroni)")->capture_default_str();
  g->add_option("--min-samples", f.min_samples, "performance: busbw samples a row needs (sweep --reps)")
      ->capture_default_str();
  g->add_option("--markdown", f.markdown,
                "write the Markdown summary here (default: appended to $GITHUB_STEP_SUMMARY when it is set)");
  g->add_option("--junit", f.junit, "write JUnit XML here (the same as --report junit=PATH)");
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

// --max-regression: 5% or 0.05, as a fraction in [0, 1).
double max_regression(const std::string& given) {
  std::string t = given;
  const bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  char* end = nullptr;
  double limit = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !(limit >= 0)) limit = -1;
  if (percent) limit /= 100;
  if (!(limit >= 0 && limit < 1))
    throw UsageError(fmt::format("--max-regression must be a fraction in [0, 1) or a percentage such as 5%, got '{}'",
                                 given));
  return limit;
}

int perf_gate(GateFlags& f, const Session& session) {
  const double limit = max_regression(f.max_regression);
  if (!(f.alpha > 0 && f.alpha < 1)) throw UsageError(fmt::format("--alpha must be in (0, 1), got {}", f.alpha));
  if (f.min_samples < 3) throw UsageError(fmt::format("--min-samples must be at least 3, got {}", f.min_samples));
  const bool side = !f.baseline_impl.empty();
  const std::string base = side ? f.baseline_impl : f.baseline, cand = side ? f.candidate_impl : f.candidate;
  GateResult r;
  if (side) {
    f.sweep.job.algos = f.baseline_impl + "," + f.candidate_impl;
    f.sweep.job.ranks_given = true;
    if (!f.sweep.json.empty()) {
      try {
        check_report_path(f.sweep.json, "--json");
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
    }
    const SweepOptions o = plan_sweep(f.sweep.job, session);
    if (static_cast<size_t>(o.reps) < f.min_samples)
      throw UsageError(fmt::format("--reps is {}; the gate needs at least --min-samples {} rounds", o.reps, f.min_samples));
    f.report.events->print("collcheck gate: timing {} and {} side by side, {} rounds\n", base, cand, o.reps);
    if (!f.sweep.json.empty() && session.root())
      f.report.events->add(sweep_json_sink(f.sweep.json, o, session, COLLCHECK_VERSION));
    const SweepResult measured = run_sweep(o, *f.report.events, session);
    try {
      r = compare_side_by_side(measured, measured.rows.size() / 2, limit, f.alpha, f.min_samples);
    } catch (const GateInputError& e) {
      throw UsageError(e.what());
    }
  } else {
    try {
      r = compare_sweeps(f.baseline, f.candidate, limit, f.alpha, f.min_samples);
    } catch (const GateInputError& e) {
      throw UsageError(e.what());
    }
  }
  say_perf_gate(*f.report.events, r, base, cand, limit, side);
  const Report rep = perf_gate_report(r, base, cand, f.max_regression);
  const int code = r.failed() ? 1 : 0;
  const int md_code = write_markdown(f, gate_markdown(r, limit), code);
  ReportFlags out = f.report;
  if (!f.junit.empty()) out.requests.push_back({"junit", f.junit});
  return finish_reports(out, rep, md_code);
}

// verify's verdicts and the fault table's as one report.
Report gate_report(const GateFlags& f, const Report& verify_rep, const Report& faults_rep) {
  Report rep;
  rep.command = "gate";
  rep.suite = fmt::format("collcheck gate {}", f.impl);
  rep.properties = verify_rep.properties;
  rep.seconds = verify_rep.seconds + faults_rep.seconds;
  for (auto c : verify_rep.cases) {
    c.name = "verify: " + c.name;
    rep.cases.push_back(std::move(c));
  }
  for (auto c : faults_rep.cases) {
    c.name = "faults: " + c.name;
    rep.cases.push_back(std::move(c));
  }
  return rep;
}

int correctness_gate(GateFlags& f, const Session& session) {
  if (!(f.budget > 0)) throw UsageError(fmt::format("--budget must be > 0 seconds, got {}", f.budget));
  Report verify_rep, faults_rep;
  // A total budget in time (a deadlocking plugin kept `--budget 10` running
  // 596 s): verify draws cases for half of it, its shrinking and replays stop
  // at its end; the fault table has the rest, and rows past the end are not
  // run (no verdict, exit 3, unless a failure was found).
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.budget);
  const std::function<bool()> spent = [end] { return std::chrono::steady_clock::now() >= end; };
  collcheck::VerifyJob job;
  job.impl = f.impl;
  job.against = f.against;
  job.cases = "100000000";
  job.time_budget_s = 0.5 * f.budget;
  job.should_stop = spent;
  job.timeout_s = f.timeout;
  add_progress_sink(f.report, session, f.progress, "gate", "cases");  // a long gate says it is alive
  const int vcode = run_verify_job(job, session, *f.report.events, [&](const VerifyOptions& o, const VerifyResult& r) {
    verify_rep = verify_report(o, r);
    return r.exit_code();
  });
  collcheck::FaultTableOptions fo;
  fo.impl = f.impl;
  fo.should_stop = spent;  // gate runs with ranks as threads only (main.cc starts no MPI world for it)
  int fcode = 0;
  try {
    fcode = collcheck::run_fault_table_job(fo, faults_rep, session, *f.report.events);
  } catch (const collcheck::ScenarioError& e) {
    // The fault table replays scenarios; an implementation that cannot run
    // in one (a plugin, say) is said, not failed.
    f.report.events->print("collcheck gate: the fault table cannot run {}: {}\n", f.impl, e.what());
    faults_rep.suite = "collcheck faults";
    faults_rep.cases.push_back({"fault table", ReportCase::Status::Skipped, e.what(), "", 0});
  }
  const Report rep = gate_report(f, verify_rep, faults_rep);
  // Bad input or a skip (no GPU) outranks a verdict; else any failure fails.
  int code = 0;
  for (int c : {vcode, fcode})
    if (c == 2 || c == kExitSkipped) return c;
  // A failure found is the verdict; else no verdict (3: the budget ran out
  // before the fault table ended, say) or an output lost (5).
  if (vcode == 1 || fcode == 1) code = 1;
  else if (vcode != 0 || fcode != 0) code = std::max(vcode, fcode);
  f.report.events->print("\ncollcheck gate: {}\n", code == 0 ? "PASS" : fmt::format("FAIL (exit {})", code));
  const int md_code = write_markdown(f, render_report("markdown", rep), code);
  ReportFlags out = f.report;
  if (!f.junit.empty()) out.requests.push_back({"junit", f.junit});
  return finish_reports(out, rep, md_code);
}

}  // namespace

int run_gate_command(GateFlags& f, const Session& session) {
  const bool files = !f.baseline.empty() || !f.candidate.empty();
  const bool side = !f.baseline_impl.empty() || !f.candidate_impl.empty();
  if (files && side)
    throw UsageError("give --baseline and --candidate (two sweep --json files) or --baseline-impl and --candidate-impl "
                     "(timed side by side), not both");
  if (side && (f.baseline_impl.empty() || f.candidate_impl.empty()))
    throw UsageError("--baseline-impl and --candidate-impl go together: two implementations timed side by side");
  const bool perf = files || side;
  if (perf && !f.impl.empty())
    throw UsageError("give --impl (correctness) or --baseline and --candidate, or --baseline-impl and --candidate-impl "
                     "(performance), not both: two CI steps");
  if (!perf && f.impl.empty())
    throw UsageError("nothing to gate: give --impl (correctness), or --baseline and --candidate (performance: two sweep "
                     "--json files), or --baseline-impl and --candidate-impl (performance: timed side by side)");
  if (files && (f.baseline.empty() || f.candidate.empty()))
    throw UsageError("--baseline and --candidate go together: two sweep --json files");
  for (const auto& [path, flag] : {std::pair{f.junit, "--junit"}, std::pair{f.markdown, "--markdown"}})
    if (!path.empty()) {
      try {
        check_report_path(path, flag);
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
    }
  return perf ? perf_gate(f, session) : correctness_gate(f, session);
}

}  // namespace collcheck::cli
