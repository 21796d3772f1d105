// collcheck soak as a job (soak_job.h): the flags as written, checked and
// turned into the soak's options.
#include "harness/soak/soak_job.h"

#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <random>

#include "harness/model/size.h"
#include "harness/model/user_values.h"

namespace collcheck {

namespace {

// The seed and the results file: a resumed soak's from its results file,
// else --seed, the plan's or a fresh one, rank 0's on every process.
void soak_seed_and_results(SoakJob& f, SoakOptions& o, const Session& session) {
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

// How it reports: progress, metrics intervals, the replay line.
void soak_outputs(const SoakJob& f, SoakOptions& o, const Session& session) {
  if (!(f.progress_interval > 0))
    throw UsageError(fmt::format("--progress-interval must be > 0 seconds, got {}", f.progress_interval));
  if (!(f.metrics_interval >= 0.1))
    throw UsageError(fmt::format("--metrics-interval must be >= 0.1 seconds, got {}", f.metrics_interval));
  o.metrics_interval_s = f.metrics_interval;
  o.version = f.version;
  o.launcher = session.launcher();
  o.run_flags = session.world_flag();
  if (session.is_sim()) o.sim_worlds = session.worlds();
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

SoakOptions plan_soak(SoakJob& f, const Session& session) {
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
  return o;
}

}  // namespace collcheck
