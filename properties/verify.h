// `collcheck verify`: draws cases from the generator, runs the properties on
// each, and on the first failure shrinks it to a minimal case and prints a
// report with one command line that replays it.
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <vector>
#include <optional>
#include <string>

#include "harness/model/exit_codes.h"
#include "harness/report/events.h"
#include "harness/report/report.h"
#include "properties/executor.h"
#include "properties/generators.h"

namespace collcheck {

struct VerifyOptions {
  std::string impl_spec;  // as given to --impl (for the replay line)
  std::string against;    // as given to --against ("" for the default peers)
  std::string launcher;   // what the replay line needs in front, as "mpirun -np 4 " ("" for threads)
  std::string run_flags;  // what the replay line needs after the impl, as " --world mpi" or " --timeout 0.5"
  std::string world_desc;   // "ranks as threads" or "MPI world of 4 processes on 1 host"
  // Where a replay token too long for a command line is written (empty: $TMPDIR, else /tmp).
  std::string token_dir;
  CaseSpace space;
  size_t cases = 1000;
  // Case i is drawn at RapidCheck size (first_size + i) mod 101: a run of few
  // cases (a soak unit) starts elsewhere than at the smallest.
  size_t first_size = 0;
  uint64_t seed = 0;
  double time_budget_s = 0;      // 0: none
  double shrink_budget_s = 120;  // shrinking stops here and reports the smallest case so far
  size_t shrink_max_runs = 5000;
  std::optional<Case> replay;    // run exactly this case
  std::vector<Case> replay_before;  // ...after these, once each, in this order (a failure's earlier cases)
  // A minimal failing case is replayed up to this many times: three failures
  // in the first three runs call it steady, else it is reported as flaky,
  // "fails k of N", with a command that repeats it. With `replay`: the case
  // runs this many times and fails if any run fails. 0: 20, or 1 with `replay`.
  size_t repeat = 0;
  // A case the harness could not run (no thread or memory) is retried after
  // this many seconds, then twice and four times as long.
  double harness_retry_s = 1.0;
  // When set and true, the run stops at the next case boundary (a soak's
  // duration or signal): no further case, shrink step or replay; the case in
  // flight ends by its deadline. What was found so far is reported.
  std::function<bool()> should_stop;
  // When set and true, the case in flight is cut short too, where the
  // executor can (the isolated child is killed): a soak's SIGTERM, which a
  // scheduler follows with SIGKILL. Not for budgets: a case cut short has no
  // verdict, and a hang would then never be found.
  std::function<bool()> cut_case;
};


struct VerifyResult {
  size_t cases_run = 0;
  bool failed = false;
  bool budget_reached = false;
  size_t failing_case = 0;  // 1-based index of the case that failed
  Case original;            // the case as generated
  Case minimal;             // after shrinking
  Failure failure;          // of the minimal case
  // The property the case as generated failed: every shrink step failed it
  // too, first or behind the property its case failed first (failure).
  std::string original_property;
  size_t shrink_steps = 0;  // accepted shrinks
  size_t shrink_runs = 0;   // cases run while shrinking
  // Runs per shrink step where the failure is flaky (0: one run, a steady failure).
  size_t shrink_tries = 0;
  // ...and the perturbation seed of the schedule it was shrunk under, where
  // another failed more often than the case's own (0: its own), with the
  // failures of that schedule in kScheduleRuns runs.
  uint64_t shrink_schedule = 0;
  size_t schedule_failures = 0;
  size_t schedule_runs = 0;  // the failing case's runs under the four schedules
  bool shrink_budget_reached = false;
  bool interrupted = false;  // should_stop ended the run (cases, shrinking or replays)
  bool case_cut = false;     // ...and cut_case cut a case short (its verdict is not known)
  size_t replays = 0;        // runs of the minimal case after shrinking (or of --replay)
  size_t replay_failures = 0;  // ...that failed (any property)
  size_t stepped_back = 0;     // shrink steps undone because their case never failed again
  size_t natural_replays = 0, natural_failures = 0;  // when a perturbed schedule was found to fail more often
  // The minimal case run once more in a fresh process (CaseExecutor::run_fresh):
  // a failure is steady only if it fails there too. Passing there, it depends
  // on earlier cases (state the implementation kept across them).
  bool fresh_checked = false, fresh_failed = false;
  bool fresh_impossible = false;  // the executor cannot start a fresh process (the MPI world)
  std::string fresh_why;          // why not ("the MPI world", "gloo:ring cannot be forked cleanly ...")
  // Depending on earlier cases: the ones found to make it fail in a fresh
  // process too (earlier_cases.h), and whether none of them can be left out.
  std::vector<Case> earlier;
  bool earlier_minimal = false;
  size_t earlier_fresh_runs = 0;
  // Where no fresh process could be tried: the cases run before the minimal
  // one (the last of them), for a replay that runs them first.
  std::vector<Case> history_tail;
  bool depends_on_earlier_cases() const { return failed && fresh_checked && !fresh_failed && replay_failures > 0; }
  bool flaky() const { return failed && replays > 0 && replay_failures < replays; }
  // The harness could not run a case, even after retries (no thread or memory
  // to be had): no verdict, exit 3. `failure` says what ran out.
  bool harness_error = false;
  double seconds = 0;
  // A run whose case was cut short and that found nothing reached no verdict.
  int exit_code() const { return failed ? 1 : harness_error || case_cut ? kExitHarnessError : 0; }
};

// Runs the verification; what it finds goes to `ev` as events (text for the
// console, progress, the case begun, the finding and the verdict).
VerifyResult run_verify(const VerifyOptions& o, CaseExecutor& exec, Events& ev);

// After the replays of a steady failure: up to three runs in a fresh process;
// passing there, the search for the earlier cases it needs (earlier_cases.cc).
class RecordingExecutor;
void check_in_fresh_process(const VerifyOptions& o, RecordingExecutor& exec, VerifyResult& r);

// The run as a report (harness/report): one verdict per property; a failed
// property carries the minimal case and the replay line.
Report verify_report(const VerifyOptions& o, const VerifyResult& r);
// A failed property as a finding event, with its replay line (the command's
// verdicts are emitted where its report is finished).
void emit_finding(Events& ev, const VerifyOptions& o, const VerifyResult& r);

// The failure's report: the minimal case, what failed, steady or flaky or
// depending on earlier cases, and the replay lines.
void print_verify_failure(Events& ev, const VerifyOptions& o, const VerifyResult& r);

// The command line that replays `c` with the implementation, peers and world of
// `o`; with `before`, a file of tokens that runs those cases first.
// A token longer than kMaxInlineToken characters is written to
// collcheck-replay-<hash>.token in o.token_dir (next to the run's reports, or
// $TMPDIR, or /tmp: never the working directory, often a user's checkout) and
// passed as `--replay @file` with the file's path.
inline constexpr size_t kMaxInlineToken = 8192;
// With `repeat` > 1 the command runs the case that many times (--repeat).
std::string replay_command(const VerifyOptions& o, const Case& c, size_t repeat = 1,
                           const std::vector<Case>& before = {});

// Leaves out of `space` every dtype/op pair some implementation of `impls`
// cannot reduce (and the dtypes and ops left with none); returns the pairs
// left out ("float16/prod"), by reason ("gloo:ring: ...").
std::map<std::string, std::vector<std::string>> restrict_space(CaseSpace& space, const std::vector<ImplPtr>& impls);

// The up-front memory estimate of verify (issue 13), in bytes for `ranks_here`
// rank(s) of one process (the world size in the thread world, 1 per MPI
// process). Each rank of a case holds, per byte of its buffer: the 4 calls'
// framed send and receive buffers (7), the inputs (1), one output per peer,
// and the check's copies (3): 11 + peers, measured as 11.4 x for ring with
// its default peer (p = 8 and 64, 1 Mi float64). A sequence adds up to 3
// calls of 2 buffers, at most max_count elements and p <= 16.
uint64_t case_memory_needed(const Case& c, int ranks_here, size_t npeers);
// The largest case `space` can draw: max_ranks ranks (ranks_here of them in
// this process) at its largest count of its widest dtype.
uint64_t verify_memory_needed(const CaseSpace& space, int ranks_here, size_t npeers);

// Prints the report of a failure that could not be shrunk (the MPI world was
// lost) and returns its exit code.
int report_unshrunk_failure(const VerifyOptions& o, const Case& c, const Failure& f, Events& ev);

}  // namespace collcheck
