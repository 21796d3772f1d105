// collcheck soak: the nightly run (issue 14). See harness/soak/soak.h.
#include <fmt/format.h>



#include "harness/cli/commands.h"
#include "harness/metrics/metrics.h"
#include "harness/soak/soak_job.h"

namespace collcheck::cli {

void add_soak(CLI::App& app, SoakFlags& f) {
  auto* s = app.add_subcommand("soak", "A long unattended run (a nightly soak): the plan's workloads mixed until "
                                       "--duration, every failure recorded and grouped, results as JSON lines, metrics "
                                       "for Prometheus");
  s->add_option("--plan", f.job.plan, "the soak plan (YAML; see examples/soak/); default: the default plan");
  s->add_option("--duration", f.job.duration, "seconds to run (a resumed soak counts the time already run)")
      ->capture_default_str();
  s->add_option("--seed", f.job.seed, "master seed, decimal or 0x hex (default: the plan's, else random; printed)");
  s->add_option("--results", f.job.results,
                "the results file, one JSON line per unit, flushed as each ends (default: "
                "collcheck-soak-<UTC date>T<time>Z-<seed>.jsonl here, a new file each run; --resume needs it named)");
  s->add_flag("--resume", f.job.resume, "continue the soak of --results: its seed, its plan, its next unit");
  add_sim_flags(s, f.sim);
  s->add_option("--world", f.world, "sim (the verify and fault units as fibers in virtual time; perf and algorithms units as threads), threads (the default) or mpi (one rank per process, under mpirun)")
      ->capture_default_str();
  add_progress_flag(s, f.job.progress);
  s->add_option("--progress-interval", f.job.progress_interval, "--progress lines: one line this often (seconds)")
      ->capture_default_str();
  add_metrics_flags(s, f.metrics, "collcheck_soak", true);
  s->add_option("--metrics-interval", f.job.metrics_interval, "seconds between pushes and textfile writes")
      ->capture_default_str();
  s->add_option("--max-input-bytes", f.job.max_input_bytes, "the largest plan file read")->capture_default_str();
  add_junit_flag(s, f.report, "write JUnit XML to PATH");
  add_report_flag(s, f.report);
}
int run_soak_command(SoakFlags& f, const Session& session) {
  const bool root = session.root();
  f.job.version = COLLCHECK_VERSION;
  SoakOptions o = plan_soak(f.job, session);
  add_progress_sink(f.report, session, f.job.progress, "soak", "units",
                    std::chrono::milliseconds(static_cast<long long>(std::min(f.job.progress_interval, 1e7) * 1000)));
  check_metrics_outputs(f.metrics);  // on every process alike; only the root keeps a registry
  if (!root) {
    try {
      return serve_soak(o, *f.report.events, session);
    } catch (const PlanError& e) {
      throw UsageError(e.what());
    }
  }

  // Metrics: the root's registry holds the world's (it judges every unit).
  std::unique_ptr<Metrics> metrics = start_metrics(f.metrics, session, *f.report.events);
  o.metrics = metrics.get();
  o.metrics_textfile = f.metrics.textfile;
  o.push = metrics && !f.metrics.pushgateway.empty();
  SoakResult r;
  try {
    r = run_soak(o, *f.report.events, session);
  } catch (const PlanError& e) {
    if (session.is_mpi()) {
      std::fprintf(stderr, "collcheck: error: %s\n", e.what());
      (void)session.from_root("E2", Clock::now() + std::chrono::seconds(30));
      return 2;
    }
    throw UsageError(e.what());
  }
  const int code = finish_reports(f.report, soak_report(o, r), r.exit_code());
  // The soak pushed and wrote at its end already; what is left is the linger.
  if (metrics && !f.metrics.listen.empty() && f.metrics.linger > 0) {
    MetricsOutputs linger_only;
    linger_only.listen = f.metrics.listen;
    linger_only.linger = f.metrics.linger;
    Events console;  // the run's stream is closed: the linger's line goes to the console alone
    console.add(console_sink());
    finish_metrics(linger_only, metrics.get(), console);
  }
  return code;
}

}  // namespace collcheck::cli
