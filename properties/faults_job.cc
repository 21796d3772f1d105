#include "properties/faults_job.h"

#include <fmt/format.h>

#include "harness/model/usage_error.h"
#include "harness/model/user_values.h"
#include "harness/peers/peer_registry.h"
#include "impl/algorithm.h"
#include "properties/detection_job.h"
#include "properties/fault_table.h"

namespace collcheck {

void plan_faults(FaultsJob& job, const Session& session) {
  if (job.ranks == -1) job.ranks = session.max_ranks(4);
  if (session.is_mpi() && job.ranks != session.processes())
    throw UsageError(fmt::format("--ranks is {}, but mpirun started {} processes; in the MPI world every process is a "
                                 "rank", job.ranks, session.processes()));
  if (job.ranks < 2 || job.ranks > kMaxThreadRanks)
    throw UsageError(fmt::format("--ranks must be between 2 and {} for the fault table, got {}", kMaxThreadRanks, job.ranks));
  if (job.mode != "both" && job.mode != "guarded" && job.mode != "unguarded")
    throw UsageError(fmt::format("--mode must be guarded, unguarded or both, got '{}'", job.mode));
  try {
    (void)make_implementation(job.impl);
  } catch (const ImplementationError& e) {
    throw UsageError(fmt::format("--impl: {}", e.what()));
  }
  if (job.random > 0) {
    job.random_seed = parse_seed(job.seed, "--seed");
    if (job.ranks > 8) throw UsageError(fmt::format("--random draws worlds of at most 8 ranks, got {}", job.ranks));
  }
}

int run_faults_job(const FaultsJob& job, const Session& session, Events& ev, Report& rep) {
  if (job.random > 0) {
    int code = 0;
    rep = run_detection_job({job.random, job.ranks, job.random_seed, job.keep_dumps}, session, ev, code);
    return code;
  }
  FaultTableOptions o;
  o.ranks = job.ranks;
  o.impl = job.impl;
  o.guarded = job.mode != "unguarded";
  o.unguarded = job.mode != "guarded";
  o.keep_dumps = job.keep_dumps;
  o.root = session.root();
  return run_fault_table_job(o, rep, session, ev);
}

}  // namespace collcheck
