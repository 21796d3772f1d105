// collcheck verify: property-based verification of an implementation.
#include <fmt/format.h>

#include <filesystem>

#include "harness/cli/commands.h"
#include "harness/model/atomic_file.h"
#include "harness/peers/mpi_impl.h"
#include "harness/peers/peer_registry.h"
#include "properties/verify.h"

namespace collcheck::cli {

namespace {
// What the random cases are drawn from, and how they are checked.
void add_case_space_flags(CLI::App* v, VerifyFlags& f) {
  v->add_option("--cases", f.job.cases, "number of random cases")->capture_default_str();
  v->add_option("--seed", f.job.seed, "seed of the case generator (default: random, printed)");
  v->add_option("--max-ranks", f.job.max_ranks,
                "largest world size generated; most cases stay at p <= 8, 15 % reach 9 to 16 and 3 % beyond (default: 64 for "
                "threads, every process for mpi)");
  v->add_option("--max-count", f.job.max_count, "largest element count generated, except the large counts")
      ->capture_default_str();
  v->add_option("--large-bytes", f.job.large_bytes,
                "(a size: 1M, 64K, ...) one case in 100 draws a count near a power-of-two byte size from 64 KiB up to this, +-1 element "
                "(0: never)")
      ->capture_default_str();
  v->add_option("--dtypes", f.job.dtypes, "dtypes to draw from: comma list or all")->capture_default_str();
  v->add_option("--ops", f.job.ops, "ops to draw from: comma list or all")->capture_default_str();
  v->add_option("--data", f.job.data, "input distributions: exact, random, extreme, special, wrap, comma list or all")
      ->capture_default_str();
  v->add_option("--one-of-ranks", f.job.one_of_ranks,
                 "float sums and products of up to N ranks are checked against the exact set of every reduction "
                 "order's outcome (bitwise at p = 2), above N within the error bound: 4 to 8 (always 4; 5 where the "
                 "set fits a cost budget; each rank more costs about 4x)")
      ->capture_default_str();
  v->add_option("--sequences", f.job.sequences,
                "on: one case in six (p <= 16) is 2 to 4 calls on one communicator, varied one field at a time, "
                "sync and async; off: every case is one call")
      ->capture_default_str();
  v->add_option("--perturb", f.job.perturb,
                "on: one case in ten (2 <= p <= 16) runs the implementation's transfers with seeded, bounded "
                "random delays; off: never")
      ->capture_default_str();
}
}  // namespace

void add_verify(CLI::App& app, VerifyFlags& f) {
  auto* v = app.add_subcommand("verify", "Property-based verification of an all-reduce implementation: random "
                                         "cases, shrinking, a replayable minimal counterexample");
  v->add_option("--impl", f.job.impl,
                "implementation under test: " + collcheck::implementation_specs())
      ->capture_default_str();
  v->add_option("--against", f.job.against,
                "peers to compare with, comma list of the same names (default: the other reference algorithms)");
  add_sim_flags(v, f.sim);
  v->add_option("--schedules", f.job.schedules, "--world sim: run each case under K schedules (races found by search)")
      ->capture_default_str();
  v->add_option("--jobs", f.job.jobs,
                "--world sim, reference algorithms: run N cases side by side, each in a world of its own (0: one per "
                "core, at most 8, as memory allows); the output is the same for every N")
      ->capture_default_str();
  v->add_option("--world", f.world, "sim (ranks as fibers in virtual time: one seed, one output, however busy the host; the default for the reference algorithms and for plugins whose collcheck_plugin_fiber_safe() returns 1, while other plugins and peer libraries run as threads unless sim is named), threads or mpi (one rank per process, under "
                                    "mpirun)")
      ->capture_default_str();
  v->add_option("--mpi-algo", f.job.mpi_algo,
                "Open MPI coll/tuned allreduce algorithm for mpi: " + mpi_algo_choices());
  add_metrics_flags(v, f.metrics, "collcheck_verify", false);
  add_case_space_flags(v, f);
  v->add_option("--time-budget", f.job.time_budget_s, "stop drawing cases after this many seconds (0: no limit)")
      ->capture_default_str();
  v->add_option("--timeout", f.job.timeout_s, "deadline of each all-reduce call, in seconds")->capture_default_str();
  v->add_option("--isolate", f.job.isolate,
                "run cases in a child process so a crash or hang is diagnosed: auto (plugins), on, off")
      ->capture_default_str();
  v->add_option("--replay", f.job.replay,
                "run exactly the case of this replay token (printed by a failing run), or @FILE for a token in a file");
  add_junit_flag(v, f.report, "also write the result as JUnit XML to this file (one testcase per property)");
  add_progress_flag(v, f.progress);
  v->add_option("--repeat", f.job.repeat,
                "replays of a minimal failing case, to tell a steady failure from a flaky one (fails k of N; "
                "default 20); with --replay: runs of the case, failing if any run fails (default 1)");
  add_report_flag(v, f.report);
}

namespace {
int output_lost_unless(bool ok, int code) { return ok || code != 0 ? code : collcheck::kExitOutputLost; }
}  // namespace

int run_verify_command(VerifyFlags& f, const collcheck::Session& session) {
  collcheck::VerifyJob& job = f.job;
  plan_verify(job, session);  // bad flags are said before any output is opened
  check_metrics_outputs(f.metrics);
  // A replay token too long for a command line goes next to the reports.
  if (!f.report.requests.empty())
    job.o.token_dir = std::filesystem::absolute(f.report.requests.front().path).parent_path().string();
  add_progress_sink(f.report, session, f.progress, "verify", "cases");
  auto metrics = start_metrics(f.metrics, session, *f.report.events);  // counts the job's unit event
  return collcheck::run_verify_job(job, session, *f.report.events,
                                   [&](const collcheck::VerifyOptions& o, const collcheck::VerifyResult& r) {
                                     std::fflush(stdout);
                                     const bool metrics_ok = finish_metrics(f.metrics, metrics.get(), *f.report.events);
                                     return finish_reports(f.report, collcheck::verify_report(o, r),
                                                           output_lost_unless(metrics_ok, r.exit_code()));
                                   });
}

}  // namespace collcheck::cli
