// verify's steps after a case fails: shrinking it, and replaying the smallest
// case that still fails to say whether the failure is steady or flaky.
// Used by verify.cc only.
#pragma once

#include <rapidcheck.h>

#include "properties/verify.h"

namespace collcheck {

// Runs `c`; a harness error (no thread or memory to be had) is retried three
// times, after 1, 2 and 4 retry periods, before it is returned.
CaseOutcome run_retrying(const VerifyOptions& opt, CaseExecutor& exec, const Case& c);

// Whether the run was asked to stop (sets r.interrupted).
bool stopping(const VerifyOptions& o, VerifyResult& r);

// A case the executor cut short: no verdict, and the run ends.
bool cut(const CaseOutcome& oc, VerifyResult& r);

// Replays r.minimal: three failures in a row make it steady; else it runs `n`
// times in all and r.replays, r.replay_failures say how many failed.
void confirm(const VerifyOptions& o, CaseExecutor& exec, VerifyResult& r, size_t n);

// How many times the minimal case is replayed (--repeat; 20 by default).
inline size_t minimal_replays(const VerifyOptions& o) { return o.repeat == 0 ? 20 : o.repeat; }

// The k-th (1, 2, 3) perturbation seed that a flaky failure is tried under,
// both before shrinking (its schedule) and after (the minimal case's replays).
uint64_t flaky_perturbation(const VerifyOptions& o, uint64_t k);

// A flaky failure's shrink steps each run up to this many times.
inline constexpr size_t kFlakyTries = 5;
// ...under the schedule, of the case's own and three perturbations, that
// failed most often in this many runs of the failing case.
inline constexpr size_t kScheduleRuns = 8;

// Shrinks the failing case `sh` (it failed `f`; r.failing_case and
// r.original are set) to r.minimal and r.failure, and replays it (r.replays,
// r.replay_failures, r.stepped_back). A flaky failure is shrunk with each
// step run up to kFlakyTries times (r.shrink_tries), under the schedule that
// shows it most often (r.shrink_schedule).
void shrink_failure(const VerifyOptions& o, CaseExecutor& exec, VerifyResult& r, const rc::Shrinkable<Case>& sh,
                    const Failure& f, Events& ev);

}  // namespace collcheck
