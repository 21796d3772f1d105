// collcheck sweep as a job: the sweep as the user asked for it (sizes, lists
// and the seed as written), checked against this machine and the session's
// world into the sweep's options, then run, with a verdict per row. The
// command line only binds the flags to a SweepJob; the gate's side-by-side
// timing runs the same job.
#pragma once

#include <string>

#include "harness/report/events.h"
#include "harness/report/report.h"
#include "harness/run/sweep.h"

namespace collcheck {

class Session;

struct SweepJob {
  // The numbers taken as they are: factor, iters, reps, warmup, ranks,
  // ranks_per_node, the inter-node edges, inplace, scalar, memcpy_peer.
  SweepOptions o;
  std::string min_bytes = "1K", max_bytes = "256K";  // -b, -e
  std::string count;                                 // -N ("": -b/-e)
  std::string dtypes = "float32", ops = "sum";       // -d, -o: lists or all
  std::string algos = "ring";                        // --algo: list, all or plugin:x.so
  std::string against;                               // --against: peers timed on the same rows
  std::string data = "mixed", seed = "1";
  int check = 1;           // -c 0|1
  double timeout_s = 60;   // --timeout: each call's deadline
  bool ranks_given = false;  // --ranks given (in the MPI world it must match mpirun's)
};

// The job checked and turned into the sweep's options: each flag in its range
// (UsageError names it), every implementation known and able to run here and
// in this world, the largest row within this machine's memory.
SweepOptions plan_sweep(SweepJob& job, const Session& session);

// Runs the planned sweep in the session's world (its rows to `ev`); on the
// root fills `rep` with one verdict per row. Returns the sweep's exit code.
int run_sweep_job(const SweepOptions& o, const Session& session, Events& ev, Report& rep);

}  // namespace collcheck
