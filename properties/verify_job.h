// A verify job: what the user asked, planned against the session and run.
//
// The command line turns flags into a VerifyJob; the job does the rest, so
// that verify and the gate run the same planning and no command calls another:
// - the implementations made and admitted: one that cannot run here (a GPU
//   library without its GPU) skips the run with exit 77, never a pass, and
//   each must fit the world and the ranks asked for;
// - the per-peer limits (Gloo's p <= 8 by default, --mpi-algo's peer) and the
//   dtype/op pairs every implementation reduces, said as text events;
// - the up-front memory check (a UsageError naming what would fit);
// - the executor of the world: threads (isolated in a child for a plugin), or
//   the MPI world, where rank 0 draws and judges the cases and every other
//   process serves them.
#pragma once

#include <functional>
#include <string>

#include "harness/model/usage_error.h"
#include "harness/session/session.h"
#include "properties/verify.h"

namespace collcheck {

struct VerifyJob {
  // As the user wrote them (flags, or a caller such as the gate); plan_verify
  // checks each (a UsageError names the flag) and fills `o`.
  std::string impl = "ring";
  std::string against;      // "": the implementation's default peers
  std::string cases = "2000";
  std::string seed;         // "": a random seed (printed)
  int max_ranks = -1;       // -1: 64 for threads, the world size for MPI
  std::string max_count = "4096", large_bytes = "1048576";
  std::string dtypes = "all", ops = "all", data = "all";
  double time_budget_s = 0;      // stop drawing cases after this long (0: no limit)
  double timeout_s = 10;         // the deadline of each call
  int one_of_ranks = 5;          // kOneOfDefaultRanks (harness/check/oracle.h)
  std::string isolate = "auto";  // auto (plugins), on, off
  std::string replay;            // a replay token, or @FILE
  std::string sequences = "on", perturb = "on";
  std::string repeat;            // "": the default
  int mpi_algo = -1;             // Open MPI coll/tuned allreduce algorithm; -1: not set
  int schedules = 1;             // --schedules: each case under K schedules (the simulated world)
  int jobs = 0;                  // --jobs: cases side by side (the simulated world); 0: one per core
  std::function<bool()> should_stop;  // a caller's own budget (the gate's)

  // Filled by plan_verify:
  VerifyOptions o;  // the case space, budget, replay and replay line (impl_spec, against, run_flags)
  bool max_ranks_given = false;  // false: Gloo's default p <= 8 applies
  bool planned = false;
};

// The job's fields checked and turned into `o`. Throws UsageError naming the
// flag. run_verify_job plans a job that is not planned yet.
void plan_verify(VerifyJob& job, const Session& session);

// The run's end on the root, before the other processes are told the exit
// code: the command's metrics and reports. Returns the exit code.
using VerifyFinish = std::function<int(const VerifyOptions& o, const VerifyResult& r)>;

// Plans and runs the job in the session's world; what it says and finds goes
// to `ev`. Throws UsageError (exit 2) for what cannot run as asked. Returns the
// exit code: kExitSkipped, the code `finish` returns on the root, or the
// root's code on the other MPI processes.
int run_verify_job(VerifyJob& job, const Session& session, Events& ev, const VerifyFinish& finish);

}  // namespace collcheck
