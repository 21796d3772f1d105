// collcheck soak: the nightly run (issue 14). See harness/soak/soak.h.
#include <fmt/format.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "harness/cli/commands.h"
#include "harness/metrics/metrics.h"
#include "harness/model/size.h"
#include "harness/peers/gloo_impl.h"
#include "harness/peers/mpi_impl.h"
#include "harness/peers/nccl_impl.h"
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
  s->add_option("--results", f.results, "the results file, one JSON line per unit, flushed as each ends")
      ->capture_default_str();
  s->add_flag("--resume", f.resume, "continue the soak of --results: its seed, its plan, its next unit");
  s->add_option("--world", f.world, "threads (the default) or mpi (one rank per process, under mpirun)")
      ->capture_default_str();
  s->add_option("--progress", f.progress, "a live progress line on stderr: auto (when a terminal), on, off")
      ->capture_default_str();
  s->add_option("--progress-interval", f.progress_interval,
                "without a live line, one progress line on stdout this often (seconds)")
      ->capture_default_str();
  s->add_option("--metrics-listen", f.metrics_listen,
                "serve /metrics on ADDR:PORT or PORT (127.0.0.1 unless ADDR is given; port 0 picks a free one and "
                "prints it)");
  s->add_option("--pushgateway", f.pushgateway,
                "push the metrics to a Pushgateway at HOST:PORT, every --metrics-interval and at the end (the job's "
                "group is replaced each time)");
  s->add_option("--push-job", f.push_job, "the Pushgateway job name")->capture_default_str();
  s->add_option("--metrics-textfile", f.metrics_textfile,
                "write the metrics atomically to PATH (node_exporter's textfile collector), every --metrics-interval "
                "and at the end");
  s->add_option("--metrics-interval", f.metrics_interval, "seconds between pushes and textfile writes")
      ->capture_default_str();
  s->add_option("--metrics-linger", f.metrics_linger,
                "with --metrics-listen: keep serving /metrics this many seconds after the end, for a last scrape "
                "(a short batch run)")
      ->capture_default_str();
  s->add_option("--max-input-bytes", f.max_input_bytes, "the largest plan file read")->capture_default_str();
  s->add_option("--junit", f.junit, "write JUnit XML to PATH (the same as --report junit=PATH)");
  add_report_flag(s, f.report);
}

int run_soak_command(SoakFlags& f) {
  MpiWorld* mpi = MpiWorld::get();
  const bool root = !mpi || mpi->root();
  SoakOptions o;
  try {
    o.plan = f.plan.empty() ? default_plan() : load_plan(f.plan, PlanLimits{parse_size(f.max_input_bytes, "--max-input-bytes"), 16});
  } catch (const PlanError& e) {
    throw UsageError(e.what());
  }
  if (!(f.duration > 0) || f.duration > 31 * 86400.0)
    throw UsageError(fmt::format("--duration must be in (0, 2678400] seconds, got {}", f.duration));
  o.duration_s = f.duration;
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
  if (mpi) {  // every process draws the same units: rank 0's seed
    const auto s = mpi->broadcast(std::to_string(o.seed), Clock::now() + std::chrono::seconds(60));
    if (!s) throw UsageError("--world mpi: rank 0 sent no seed within 60 s");
    o.seed = std::stoull(*s);
  }
  o.results_path = f.results;
  o.resume = f.resume;
  if (f.progress != "auto" && f.progress != "on" && f.progress != "off")
    throw UsageError(fmt::format("--progress must be auto, on or off, got '{}'", f.progress));
  o.progress_tty = root && (f.progress == "on" || (f.progress == "auto" && ::isatty(STDERR_FILENO)));
  if (!(f.progress_interval > 0))
    throw UsageError(fmt::format("--progress-interval must be > 0 seconds, got {}", f.progress_interval));
  o.progress_interval_s = f.progress_interval;
  if (!(f.metrics_linger >= 0) || f.metrics_linger > 3600)
    throw UsageError(fmt::format("--metrics-linger must be in [0, 3600] seconds, got {}", f.metrics_linger));
  if (!(f.metrics_interval >= 0.1))
    throw UsageError(fmt::format("--metrics-interval must be >= 0.1 seconds, got {}", f.metrics_interval));
  o.metrics_interval_s = f.metrics_interval;
  o.version = COLLCHECK_VERSION;
  if (mpi) {
    o.launcher = fmt::format("mpirun -np {} ", mpi->size());
    o.run_flags = " --world mpi";
  }
  if (!f.junit.empty()) {
    try {
      check_report_path(f.junit, "--junit");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    f.report.requests.push_back({"junit", f.junit});
  }
  if (!f.metrics_textfile.empty()) {
    try {
      check_report_path(f.metrics_textfile, "--metrics-textfile");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  if (f.push_job.empty() || f.push_job.find('/') != std::string::npos)
    throw UsageError(fmt::format("--push-job must be a name without '/', got '{}'", f.push_job));
  // The resumed soak's seed and plan are in its results file: read there (run_soak checks the file).
  try {
    const uint64_t need = soak_memory_needed(o);
    refuse_unless_fits(need, [&](uint64_t have) {
      return fmt::format("the plan's largest unit needs about {} in this process (its largest verify case, or 4 x "
                         "ranks x workloads.perf.max_bytes); {} is available: lower workloads.perf.max_bytes, "
                         "workloads.verify.max_count or large_bytes, or ranks.max",
                         format_bytes(need), format_bytes(have));
    });
  } catch (const PlanError& e) {
    throw UsageError(e.what());
  }

  if (mpi && !root) {
    try {
      return serve_soak(o, *mpi);
    } catch (const PlanError& e) {
      throw UsageError(e.what());
    }
  }

  // Metrics: the root's registry holds the world's (it judges every unit).
  std::map<std::string, std::string> versions{{"version", COLLCHECK_VERSION}, {"mpi", mpi_library_version()},
                                              {"gloo", gloo_version()}, {"nccl", nccl_version_string()}};
  Metrics metrics(versions);
  o.metrics = &metrics;
  o.metrics_textfile = f.metrics_textfile;
  if (!f.pushgateway.empty()) {
    try {
      metrics.set_pushgateway(f.pushgateway, f.push_job, "");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    o.push = true;
  }
  if (!f.metrics_listen.empty()) {
    std::string addr = f.metrics_listen;
    if (addr.find(':') == std::string::npos) addr = "127.0.0.1:" + addr;
    try {
      (void)split_host_port(addr, "--metrics-listen");
      const int port = metrics.listen(addr);
      fmt::print("metrics: http://{}:{}/metrics\n", addr.substr(0, addr.rfind(':')), port);
      std::fflush(stdout);
    } catch (const std::exception& e) {
      throw UsageError(fmt::format("--metrics-listen: {}", e.what()));
    }
  }
  SoakResult r;
  try {
    r = run_soak(o, stdout);
  } catch (const PlanError& e) {
    if (mpi) {
      std::fprintf(stderr, "collcheck: error: %s\n", e.what());
      (void)mpi->broadcast("E2", Clock::now() + std::chrono::seconds(30));
      return 2;
    }
    throw UsageError(e.what());
  }
  const int code = finish_reports(f.report, soak_report(o, r), r.exit_code());
  if (!f.metrics_listen.empty() && f.metrics_linger > 0) {
    fmt::print("metrics: serving the final values for {} s more\n", f.metrics_linger);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(f.metrics_linger));
  }
  return code;
}

}  // namespace collcheck::cli
