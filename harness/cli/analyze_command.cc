// collcheck analyze: its flags; the job (harness/run/analyze_job.h) reads and
// diagnoses the dumps.
#include "harness/cli/commands.h"
#include "harness/model/user_values.h"
#include "harness/run/analyze_job.h"

namespace collcheck::cli {

void add_analyze(CLI::App& app, AnalyzeFlags& f) {
  auto* an = app.add_subcommand(
      "analyze", "Diagnose from the per-rank flight-recorder dumps alone: collcheck's (rank-*.json in a directory) or "
                 "PyTorch's Flight Recorder (one file per rank, pickle or JSON, its name ending in the rank). Exit 0: "
                 "clean, 1: a diagnosis, 4: the dumps cannot decide (what is missing is printed), 2: bad input");
  an->add_option("dir", f.dir, "directory with rank-<r>.json files, or PyTorch Flight Recorder dumps")->required();
  an->add_option("--world-size", f.world_size,
                 "PyTorch dumps: how many ranks the job had, when the dumps do not say (torch 2.14's Gloo dumps "
                 "do not): a rank of the world without a dump is then named")
      ->check(CLI::Range(1, 1'000'000));
  an->add_option("--emit-scenario", f.emit_scenario,
                 "PyTorch Flight Recorder dumps: also write a scenario that reproduces the hang to this file (the "
                 "process groups, each rank's recorded collectives, the divergence, and the diagnosis to expect); "
                 "collcheck replay runs it");
  an->add_option("--emit-max-count", f.emit_max_count,
                 "the emitted scenario's largest call, in elements: larger dumps' sizes are scaled down by one factor "
                 "for every call, distinct sizes kept distinct (0: the dumps' sizes)")
      ->capture_default_str();
  add_report_flag(an, f.report);
}

int run_analyze_command(AnalyzeFlags& f) {
  collcheck::AnalyzeJob job{f.dir, f.world_size, f.emit_scenario,
                            collcheck::parse_count(f.emit_max_count, "--emit-max-count")};  // bad input before any output
  Report rep;
  const int code = collcheck::run_analyze_job(job, *f.report.events, rep);
  return finish_reports(f.report, rep, code);
}

}  // namespace collcheck::cli
