// collcheck gate as a job: one verdict for a CI step.
//
// - Correctness (`impl`): verify over half the budget (shrinking and replays
//   stop at its end), then the fault table with the rest; rows past the end
//   are not run (no verdict, exit 3, unless a failure was found).
// - Performance: two sweep --json files (`baseline`, `candidate`), or two
//   implementations timed side by side in one sweep, round by round
//   (`baseline_impl`, `candidate_impl`; the sweep's shape in `sweep`), each
//   row compared with a one-sided test over the busbw samples
//   (harness/run/perf_gate.h).
// The command line binds the flags to a GateJob and writes what the job
// returns: the report (JUnit and the other formats) and the Markdown summary.
#pragma once

#include <string>

#include "harness/report/events.h"
#include "harness/report/report.h"
#include "harness/run/sweep_job.h"
#include "harness/session/session.h"

namespace collcheck {

struct GateJob {
  // Correctness.
  std::string impl, against;
  double budget_s = 300;  // seconds in all: verify's cases, shrinking and replays, then the fault table
  double timeout_s = 10;  // the deadline of each all-reduce call
  // Performance.
  std::string baseline, candidate;            // two sweep --json files
  std::string baseline_impl, candidate_impl;  // or two implementations timed side by side
  SweepJob sweep;                             // the side-by-side sweep's shape (its algos are the two)
  std::string sweep_json;                     // side by side: the sweep's rows written here ("": not)
  std::string max_regression = "5%";
  double alpha = 0.05;
  size_t min_samples = 9;
  std::string version;  // collcheck's, in the sweep's JSON
};

// The flags' combination: one kind of gate, its flags together (UsageError).
void check_gate(const GateJob& job);

// Checks and runs the gate in the session's world (what it says to `ev`);
// fills `rep` with its verdicts and `markdown` with its summary. Returns the
// exit code: 0 pass, 1 a failure, 2 bad input, 3 no verdict (the budget ran
// out), kExitSkipped (cannot run here).
int run_gate_job(GateJob& job, const Session& session, Events& ev, Report& rep, std::string& markdown);

}  // namespace collcheck
