// collcheck replay: a scenario file run to its diagnosis.
#include <fmt/format.h>



#include "harness/cli/commands.h"

namespace collcheck::cli {

void add_replay(CLI::App& app, ReplayFlags& f) {
  auto* r = app.add_subcommand("replay", "Run a scenario file (YAML or JSON): print the diagnosis and a per-rank "
                                         "timeline; exit 0 when its expectation holds");
  r->add_option("file", f.job.file, "scenario file (see examples/bugs/)")->required();
  r->add_option("--mode", f.job.mode, "guarded or unguarded (default: the scenario's mode)");
  add_sim_flags(r, f.sim);
  r->add_option("--world", f.world, "sim (ranks as fibers in virtual time: one seed, one output, however busy the host; the default for the reference algorithms and for plugins whose collcheck_plugin_fiber_safe() returns 1, while other plugins and peer libraries run as threads unless sim is named), threads or mpi (one rank per process, under mpirun -np <ranks>)")
      ->capture_default_str();
  r->add_option("--dump-dir", f.job.dump_dir, "where each rank's flight-recorder dump goes (unguarded mode always "
                                          "dumps, to a temporary directory by default)");
  r->add_option("--max-input-bytes", f.job.max_input_bytes, "the largest scenario file read (a size: 16M, 1G)")
      ->capture_default_str();
  r->add_option("--max-steps", f.job.max_steps, "the most steps of all programs together")->capture_default_str();
  add_progress_flag(r, f.progress);
  add_report_flag(r, f.report);
}

int run_replay_command(ReplayFlags& f, const Session& session) {
  add_progress_sink(f.report, session, f.progress, "replay", "");
  return run_replay_job(f.job, session, *f.report.events,
                        [&](const Report& rep, int code) { return finish_reports(f.report, rep, code); });
}

}  // namespace collcheck::cli
