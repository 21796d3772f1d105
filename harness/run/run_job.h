// collcheck run as a job: a real MPI program, started by the user's launcher
// (`mpirun -np 4 ./app`, `srun ...`) with collcheck's PMPI interposer
// (libcollcheck-mpi.so, interpose/) preloaded; every rank's calls recorded,
// checked before each collective in guarded mode, and dumped when the job
// ends, hangs (a blocking call past the deadline) or is killed. The dumps are
// then diagnosed by the analyze job, and can be written out as a scenario.
#pragma once

#include <string>
#include <vector>

#include "harness/report/events.h"
#include "harness/report/report.h"

namespace collcheck {

struct RunJob {
  std::vector<std::string> command;  // the launcher and its arguments
  std::string mode = "guarded";      // guarded | unguarded
  double deadline_s = 60;            // the most one blocking MPI call may take
  double time_limit_s = 3600;        // the most the whole job may take (then every rank dumps and it is stopped)
  std::string dir;                   // where the dumps go ("": collcheck-run-<time>-<pid>)
  std::string library;               // libcollcheck-mpi.so ("": next to collcheck, or the installed one)
  std::string emit_scenario;         // also write a scenario that reproduces the dumps here
  size_t emit_max_count = 65536;
};

// Checks the job's flags (UsageError names the bad one).
void check_run_job(RunJob& job, const std::string& self_exe);

// Runs the job and diagnoses its dumps; fills `rep`; returns the exit code:
// 0 clean (and the launcher's code 0), 1 a diagnosis, 3 the job failed with
// no collective bug in its dumps, 4 the dumps cannot decide (or there are none).
int run_mpi_job(const RunJob& job, Events& ev, Report& rep);

// Where the call sites of the dumps in `dir` are object + offset, file and
// line (addr2line, where the program has debug information) and the function.
void resolve_call_sites(const std::string& dir);

}  // namespace collcheck
