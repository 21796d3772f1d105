// `collcheck faults` as a job: its flags as written, checked against the
// session's world (UsageError names the flag), then the fault table
// (fault_table.h) or, with `random`, the detection property
// (detection_job.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/report/events.h"
#include "harness/report/report.h"
#include "harness/session/session.h"

namespace collcheck {

struct FaultsJob {
  std::string impl = "ring";
  int ranks = -1;             // -1: 4, or every process in the MPI world
  std::string mode = "both";  // guarded, unguarded or both
  size_t random = 0;          // > 0: the detection property, this many random cases
  std::string seed = "1";     // --random's
  std::string keep_dumps;     // a failed row's (or --random case's) dumps are kept here ("": not kept)
  uint64_t random_seed = 0;   // `seed` parsed (plan_faults)
};

// Checks the job (throws UsageError naming the flag) and settles its ranks.
void plan_faults(FaultsJob& job, const Session& session);

// Runs the planned job: its verdicts in `rep` (the root's), the table or the
// property's cases as events. Returns this process's exit code (the root's is
// the verdict).
int run_faults_job(const FaultsJob& job, const Session& session, Events& ev, Report& rep);

}  // namespace collcheck
