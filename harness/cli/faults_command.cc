// collcheck faults: every nemesis injected into a small training step (the
// fault table), or the detection property over random scenarios (--random).
#include <fmt/format.h>

#include "harness/cli/commands.h"
#include "impl/algorithm.h"
#include "properties/faults_job.h"

namespace collcheck::cli {

void add_faults(CLI::App& app, FaultsFlags& f) {
  auto* fa = app.add_subcommand("faults", "Inject every nemesis into a small training-step scenario and print fault, "
                                          "detected, diagnosis and time to diagnosis");
  fa->add_option("--impl", f.job.impl, "implementation: " + algorithm_choices() + " or plugin:<path.so>")->capture_default_str();
  fa->add_option("--ranks", f.job.ranks, "world size (default: 4 as threads; every process in the MPI world)");
  fa->add_option("--mode", f.job.mode, "guarded, unguarded or both")->capture_default_str();
  add_sim_flags(fa, f.sim);
  fa->add_option("--world", f.world, "sim (ranks as fibers in virtual time: one seed, one output, however busy the host; the default for the reference algorithms and for plugins whose collcheck_plugin_fiber_safe() returns 1, while other plugins and peer libraries run as threads unless sim is named), threads or mpi (under mpirun; every process is a rank)")
      ->capture_default_str();
  fa->add_option("--random", f.job.random,
                 "run the detection property instead: this many random scenarios, each with a random fault");
  fa->add_option("--seed", f.job.seed, "seed of --random")->capture_default_str();
  fa->add_option("--keep-dumps", f.job.keep_dumps,
                 "keep the flight-recorder dumps of a row (with --random: a case) that is not diagnosed as injected here, "
                 "one folder per row or case (default: every row's dumps are removed)");
  add_progress_flag(fa, f.progress);
  add_report_flag(fa, f.report);
}

int run_faults_command(FaultsFlags& f, const Session& session) {
  plan_faults(f.job, session);
  if (f.job.random > 0) add_progress_sink(f.report, session, f.progress, "faults", "cases");
  Report rep;
  int code = run_faults_job(f.job, session, *f.report.events, rep);
  if (session.root()) code = finish_reports(f.report, rep, code);
  return session.agree_exit_code(code);  // every rank exits with rank 0's verdict
}

}  // namespace collcheck::cli
