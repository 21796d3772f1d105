// collcheck soak: the nightly run (issue 14). See harness/soak/soak.h.
#include <fmt/format.h>

#include <ctime>
#include <unistd.h>

#include <random>
#include <thread>

#include "harness/cli/commands.h"
#include "harness/metrics/metrics.h"
#include "harness/model/size.h"
#include "harness/soak/soak.h"
#include "harness/world/mpi_world.h"

namespace collcheck::cli {

void add_soak(CLI::App& app, SoakFlags& f) {
  auto* s = app.add_subcommand("soak", "A long unattended run (a nightly soak): the plan's workloads mixed until "
                                       "--duration, every failure recorded and grouped, results as JSON lines, metrics "
                                       "for Prometheus");
  s->add_option("--plan", f.plan, "the soak plan (YAML; see examples/soak/); default: the default plan");
  s->add_option("--duration", f.duration, "seconds to run (a resumed soak counts the time already run)")
      ->capture_default_str();
  s->add_option("--seed", f.seed, "master seed, decimal or 0x hex (default: the plan's, else random; printed)");
  s->add_option("--results", f.results,
                "the results file, one JSON line per unit, flushed as each ends (default: "
                "collcheck-soak-<UTC date>T<time>Z-<seed>.jsonl here, a new file each run; --resume needs it named)");
  s->add_flag("--resume", f.resume, "continue the soak of --results: its seed, its plan, its next unit");
  add_sim_flags(s, f.sim);
  s->add_option("--world", f.world, "sim (the verify and fault units as fibers in virtual time; perf and algorithms units as threads), threads (the default) or mpi (one rank per process, under mpirun)")
      ->capture_default_str();
  s->add_option("--progress", f.progress, "a live progress line on stderr: auto (when a terminal), on, off")
      ->capture_default_str();
  s->add_option("--progress-interval", f.progress_interval,
                "without a live line, one progress line on stdout this often (seconds)")
      ->capture_default_str();
  add_metrics_flags(s, f.metrics, "collcheck_soak", true);
  s->add_option("--metrics-interval", f.metrics_interval, "seconds between pushes and textfile writes")
      ->capture_default_str();
  s->add_option("--max-input-bytes", f.max_input_bytes, "the largest plan file read")->capture_default_str();
  s->add_option("--junit", f.junit, "write JUnit XML to PATH (the same as --report junit=PATH)");
  add_report_flag(s, f.report);
}
namespace {

// The seed and the results file: a resumed soak's from its results file,
// else --seed, the plan's or a fresh one, rank 0's on every process.
void soak_seed_and_results(SoakFlags& f, SoakOptions& o, const Session& session) {
  if (f.resume && f.results.empty())
    throw UsageError("--resume continues the soak of a results file: name it with --results PATH");
  if (f.resume) {
    // The soak goes on as it began: its seed and plan are in its results file.
    if (!f.seed.empty() || !f.plan.empty())
      throw UsageError("--resume takes the seed and the plan from the results file's start line: leave out --seed and --plan");
    try {
      const SoakHeader h = read_soak_header(f.results);
      o.seed = h.seed;
      o.plan = h.plan;
    } catch (const PlanError& e) {
      throw UsageError(e.what());
    }
  } else if (!f.seed.empty()) o.seed = parse_seed(f.seed, "--seed");
  else if (o.plan.seed) o.seed = *o.plan.seed;
  else o.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  {  // every process draws the same units: rank 0's seed
    const auto s = session.from_root(std::to_string(o.seed), Clock::now() + std::chrono::seconds(60));
    if (!s) throw UsageError("--world mpi: rank 0 sent no seed within 60 s");
    o.seed = std::stoull(*s);
  }
  if (f.results.empty()) {
    // Each run its own file: a nightly job in one directory does not find
    // yesterday's file in its way (issue 31).
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
    f.results = fmt::format("collcheck-soak-{}-{:016x}.jsonl", stamp, o.seed);
  }
  o.results_path = f.results;
  o.resume = f.resume;
}

// How it reports: progress, metrics intervals, the replay line, --junit.
void soak_outputs(SoakFlags& f, SoakOptions& o, const Session& session) {
  const bool root = session.root();
  if (f.progress != "auto" && f.progress != "on" && f.progress != "off")
    throw UsageError(fmt::format("--progress must be auto, on or off, got '{}'", f.progress));
  o.progress_tty = root && (f.progress == "on" || (f.progress == "auto" && ::isatty(STDERR_FILENO)));
  if (!(f.progress_interval > 0))
    throw UsageError(fmt::format("--progress-interval must be > 0 seconds, got {}", f.progress_interval));
  o.progress_interval_s = f.progress_interval;
  if (!(f.metrics_interval >= 0.1))
    throw UsageError(fmt::format("--metrics-interval must be >= 0.1 seconds, got {}", f.metrics_interval));
  o.metrics_interval_s = f.metrics_interval;
  o.version = COLLCHECK_VERSION;
  o.launcher = session.launcher();
  o.run_flags = session.world_flag();
  if (session.is_sim()) o.sim_worlds = session.worlds();
  if (!f.junit.empty()) {
    try {
      check_report_path(f.junit, "--junit");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    f.report.requests.push_back({"junit", f.junit});
  }
}

// The plan's largest unit must fit this process's memory (a resumed soak's
// seed and plan are in its results file: read there; run_soak checks the file).
void refuse_unless_soak_fits(const SoakOptions& o, const Session& session) {
  try {
    const uint64_t need = soak_memory_needed(o, session);
    refuse_unless_fits(session, need, [&](uint64_t have) {
      return fmt::format("the plan's largest unit needs about {} in this process (its largest verify case, or 4 x "
                         "ranks x workloads.perf.max_bytes); {} is available: lower workloads.perf.max_bytes, "
                         "workloads.verify.max_count or large_bytes, or ranks.max",
                         format_bytes(need), format_bytes(have));
    });
  } catch (const PlanError& e) {
    throw UsageError(e.what());
  }
}

}  // namespace

int run_soak_command(SoakFlags& f, const Session& session) {
  const bool root = session.root();
  SoakOptions o;
  try {
    o.plan = f.plan.empty() ? default_plan() : load_plan(f.plan, PlanLimits{parse_size(f.max_input_bytes, "--max-input-bytes"), 16});
  } catch (const PlanError& e) {
    throw UsageError(e.what());
  }
  if (!(f.duration > 0) || f.duration > 31 * 86400.0)
    throw UsageError(fmt::format("--duration must be in (0, 2678400] seconds, got {}", f.duration));
  o.duration_s = f.duration;
  soak_seed_and_results(f, o, session);
  soak_outputs(f, o, session);
  refuse_unless_soak_fits(o, session);

  check_metrics_flags(f.metrics);  // on every process alike; only the root keeps a registry
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
    MetricsFlags linger_only;
    linger_only.listen = f.metrics.listen;
    linger_only.linger = f.metrics.linger;
    finish_metrics(linger_only, metrics.get());
  }
  return code;
}

}  // namespace collcheck::cli
