// collcheck gate as a job (gate_job.h): correctness (verify over a budget,
// then the fault table) or performance (two sweep files, or two
// implementations timed side by side), each with its verdicts and summary.
#include "properties/gate_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "harness/run/perf_gate.h"
#include "properties/fault_table.h"
#include "properties/verify_job.h"

namespace collcheck {

namespace {

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

int perf_gate(GateJob& f, const Session& session, Events& ev, Report& rep, std::string& markdown) {
  const double limit = max_regression(f.max_regression);
  if (!(f.alpha > 0 && f.alpha < 1)) throw UsageError(fmt::format("--alpha must be in (0, 1), got {}", f.alpha));
  if (f.min_samples < 3) throw UsageError(fmt::format("--min-samples must be at least 3, got {}", f.min_samples));
  const bool side = !f.baseline_impl.empty();
  const std::string base = side ? f.baseline_impl : f.baseline, cand = side ? f.candidate_impl : f.candidate;
  GateResult r;
  if (side) {
    f.sweep.algos = f.baseline_impl + "," + f.candidate_impl;
    f.sweep.ranks_given = true;
    const SweepOptions o = plan_sweep(f.sweep, session);
    if (static_cast<size_t>(o.reps) < f.min_samples)
      throw UsageError(fmt::format("--reps is {}; the gate needs at least --min-samples {} rounds", o.reps, f.min_samples));
    ev.print("collcheck gate: timing {} and {} side by side, {} rounds\n", base, cand, o.reps);
    if (!f.sweep_json.empty() && session.root()) ev.add(sweep_json_sink(f.sweep_json, o, session, f.version));
    const SweepResult measured = run_sweep(o, ev, session);
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
  say_perf_gate(ev, r, base, cand, limit, side);
  rep = perf_gate_report(r, base, cand, f.max_regression);
  markdown = gate_markdown(r, limit);
  return r.failed() ? 1 : 0;
}

// verify's verdicts and the fault table's as one report.
Report gate_report(const GateJob& f, const Report& verify_rep, const Report& faults_rep) {
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

int correctness_gate(GateJob& f, const Session& session, Events& ev, Report& rep, std::string& markdown) {
  if (!(f.budget_s > 0)) throw UsageError(fmt::format("--budget must be > 0 seconds, got {}", f.budget_s));
  Report verify_rep, faults_rep;
  // A total budget in time (a deadlocking plugin kept `--budget 10` running
  // 596 s): verify draws cases for half of it, its shrinking and replays stop
  // at its end; the fault table has the rest, and rows past the end are not
  // run (no verdict, exit 3, unless a failure was found).
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.budget_s);
  const std::function<bool()> spent = [end] { return std::chrono::steady_clock::now() >= end; };
  collcheck::VerifyJob job;
  job.impl = f.impl;
  job.against = f.against;
  job.cases = "100000000";
  job.time_budget_s = 0.5 * f.budget_s;
  job.should_stop = spent;
  job.timeout_s = f.timeout_s;
  const int vcode = run_verify_job(job, session, ev, [&](const VerifyOptions& o, const VerifyResult& r) {
    verify_rep = verify_report(o, r);
    return r.exit_code();
  });
  collcheck::FaultTableOptions fo;
  fo.impl = f.impl;
  fo.should_stop = spent;  // gate runs with ranks as threads only (main.cc starts no MPI world for it)
  int fcode = 0;
  try {
    fcode = collcheck::run_fault_table_job(fo, faults_rep, session, ev);
  } catch (const collcheck::ScenarioError& e) {
    // The fault table replays scenarios; an implementation that cannot run
    // in one (a plugin, say) is said, not failed.
    ev.print("collcheck gate: the fault table cannot run {}: {}\n", f.impl, e.what());
    faults_rep.suite = "collcheck faults";
    faults_rep.cases.push_back({"fault table", ReportCase::Status::Skipped, e.what(), "", 0});
  }
  rep = gate_report(f, verify_rep, faults_rep);
  // Bad input or a skip (no GPU) outranks a verdict; else any failure fails.
  int code = 0;
  for (int c : {vcode, fcode})
    if (c == 2 || c == kExitSkipped) return c;
  // A failure found is the verdict; else no verdict (3: the budget ran out
  // before the fault table ended, say) or an output lost (5).
  if (vcode == 1 || fcode == 1) code = 1;
  else if (vcode != 0 || fcode != 0) code = std::max(vcode, fcode);
  ev.print("\ncollcheck gate: {}\n", code == 0 ? "PASS" : fmt::format("FAIL (exit {})", code));
  markdown = render_report("markdown", rep);
  return code;
}

}  // namespace

void check_gate(const GateJob& f) {
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
}

int run_gate_job(GateJob& job, const Session& session, Events& ev, Report& rep, std::string& markdown) {
  check_gate(job);
  const bool perf = !job.baseline.empty() || !job.baseline_impl.empty();
  return perf ? perf_gate(job, session, ev, rep, markdown) : correctness_gate(job, session, ev, rep, markdown);
}

}  // namespace collcheck
