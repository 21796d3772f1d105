// collcheck run: its flags; the job (harness/run/run_job.h) runs the user's
// MPI program under the interposer and diagnoses the dumps.
#include <unistd.h>

#include "harness/cli/commands.h"
#include "harness/model/user_values.h"
#include "harness/run/run_job.h"

namespace collcheck::cli {

void add_run(CLI::App& app, RunFlags& f) {
  auto* run = app.add_subcommand(
      "run", "Run a real MPI program under collcheck's PMPI interposer (libcollcheck-mpi.so, preloaded): every rank's "
             "collectives and point-to-point calls recorded, each collective checked across its communicator before "
             "it runs (guarded mode), a deadline on every blocking call; the dumps are then diagnosed as `collcheck "
             "analyze` does. Write the launcher after --: collcheck run -- mpirun -np 4 ./app. Exit 0: clean, 1: a "
             "diagnosis, 3: the job failed with no collective bug in its dumps, 4: the dumps cannot decide, 2: bad input");
  run->add_option("--mode", f.job.mode,
                  "guarded: a fingerprint exchange before each collective names a mismatch before MPI hangs or "
                  "corrupts data, then ends the job; unguarded: record only")
      ->capture_default_str();
  run->add_option("--deadline", f.job.deadline_s,
                  "seconds one blocking MPI call may take before the rank's watchdog dumps every rank's recorder and "
                  "ends the job")
      ->capture_default_str();
  run->add_option("--time-limit", f.job.time_limit_s,
                  "seconds the whole job may take (a rank computing forever never blocks in MPI); then every rank "
                  "dumps and the job is stopped")
      ->capture_default_str();
  run->add_option("--dir", f.job.dir, "directory for the dumps (new or empty; default collcheck-run-<time>-<pid>)");
  run->add_option("--mpi-lib", f.job.library,
                  "the interposer library (default: libcollcheck-mpi.so next to collcheck, or in the installed lib "
                  "directory; or COLLCHECK_MPI_LIB)");
  run->add_option("--emit-scenario", f.emit_scenario,
                  "also write a scenario that reproduces the job's collectives and its diagnosis to this file; "
                  "collcheck replay runs it");
  run->add_option("--emit-max-count", f.emit_max_count,
                  "the emitted scenario's largest call, in elements (0: the dumps' sizes)")
      ->capture_default_str();
  run->add_option("command", f.job.command, "the launcher and the program, after --")->required();
  add_report_flag(run, f.report);
}

int run_run_command(RunFlags& f) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  const std::string exe = n > 0 ? std::string(self, static_cast<size_t>(n)) : "collcheck";
  f.job.emit_scenario = f.emit_scenario;
  f.job.emit_max_count = collcheck::parse_count(f.emit_max_count, "--emit-max-count");
  collcheck::check_run_job(f.job, exe);  // bad input before the job starts
  Report rep;
  const int code = collcheck::run_mpi_job(f.job, *f.report.events, rep);
  return finish_reports(f.report, rep, code);
}

}  // namespace collcheck::cli
