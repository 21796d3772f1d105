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
  VerifyOptions o;  // the case space, budget, replay and replay line (impl_spec, against, run_flags)
  std::string impl = "ring";
  std::string against;      // "": the implementation's default peers
  int mpi_algo = -1;        // Open MPI coll/tuned allreduce algorithm; -1: not set
  bool max_ranks_given = false;  // false: Gloo's default p <= 8 applies
  std::string isolate = "auto";  // auto (plugins), on, off
  double timeout_s = 10;         // the deadline of each call
  int schedules = 1;             // --schedules: each case under K schedules (the simulated world)
  int jobs = 0;                  // --jobs: cases side by side (the simulated world); 0: one per core
};

// The run's end on the root, before the other processes are told the exit
// code: the command's metrics and reports. Returns the exit code.
using VerifyFinish = std::function<int(const VerifyOptions& o, const VerifyResult& r)>;

// Plans and runs the job in the session's world; what it says and finds goes
// to `ev`. Throws UsageError (exit 2) for what cannot run as asked. Returns the
// exit code: kExitSkipped, the code `finish` returns on the root, or the
// root's code on the other MPI processes.
int run_verify_job(VerifyJob& job, const Session& session, Events& ev, const VerifyFinish& finish);

}  // namespace collcheck
