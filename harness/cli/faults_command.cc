// collcheck faults: every nemesis injected into a small training step (the
// fault table), or the detection property over random scenarios (--random).
#include <fmt/format.h>

#include "harness/cli/commands.h"
#include "harness/peers/peer_registry.h"
#include "impl/algorithm.h"
#include "properties/detection_job.h"
#include "properties/fault_table.h"

namespace collcheck::cli {

void add_faults(CLI::App& app, FaultsFlags& f) {
  auto* fa = app.add_subcommand("faults", "Inject every nemesis into a small training-step scenario and print fault, "
                                          "detected, diagnosis and time to diagnosis");
  fa->add_option("--impl", f.impl, "implementation: " + algorithm_choices() + " or plugin:<path.so>")->capture_default_str();
  fa->add_option("--ranks", f.ranks, "world size (default: 4 as threads; every process in the MPI world)");
  fa->add_option("--mode", f.mode, "guarded, unguarded or both")->capture_default_str();
  add_sim_flags(fa, f.sim);
  fa->add_option("--world", f.world, "sim (ranks as fibers in virtual time: one seed, one output, however busy the host; the default for the reference algorithms, while plugins and peer libraries run as threads unless sim is named), threads or mpi (under mpirun; every process is a rank)")
      ->capture_default_str();
  fa->add_option("--random", f.random,
                 "run the detection property instead: this many random scenarios, each with a random fault");
  fa->add_option("--seed", f.seed, "seed of --random")->capture_default_str();
  fa->add_option("--keep-dumps", f.keep_dumps,
                 "keep the flight-recorder dumps of a row that is not diagnosed as injected here, one folder per row "
                 "(default: every row's dumps are removed)");
  add_progress_flag(fa, f.progress);
  add_report_flag(fa, f.report);
}

namespace {

// The detection property (properties/detection_job.h), its report and exit code.
int run_detection(FaultsFlags& f, int p, uint64_t seed, const Session& session) {
  add_progress_sink(f.report, session, f.progress, "faults", "cases");
  int code = 0;
  const Report rep = collcheck::run_detection_job({f.random, p, seed}, session, *f.report.events, code);
  if (session.root()) code = finish_reports(f.report, rep, code);
  return session.agree_exit_code(code);
}

}  // namespace

int run_faults_command(FaultsFlags& f, const Session& session) {
  using collcheck::UsageError;
  collcheck::MpiWorld* mpi = session.mpi();
  const int ranks = f.ranks == -1 ? (session.max_ranks(4)) : f.ranks;
  if (mpi && ranks != mpi->size())
    throw UsageError(fmt::format("--ranks is {}, but mpirun started {} processes; in the MPI world every process is a "
                                 "rank", ranks, mpi->size()));
  if (ranks < 2 || ranks > kMaxThreadRanks)
    throw UsageError(fmt::format("--ranks must be between 2 and {} for the fault table, got {}", kMaxThreadRanks, ranks));
  if (f.mode != "both" && f.mode != "guarded" && f.mode != "unguarded")
    throw UsageError(fmt::format("--mode must be guarded, unguarded or both, got '{}'", f.mode));
  try {
    (void)collcheck::make_implementation(f.impl);
  } catch (const collcheck::ImplementationError& e) {
    throw UsageError(fmt::format("--impl: {}", e.what()));
  }
  if (f.random > 0) {
    const uint64_t seed = parse_seed(f.seed, "--seed");
    if (ranks > 8) throw UsageError(fmt::format("--random draws worlds of at most 8 ranks, got {}", ranks));
    return run_detection(f, ranks, seed, session);
  }
  collcheck::FaultTableOptions o;
  o.ranks = ranks;
  o.impl = f.impl;
  o.guarded = f.mode != "unguarded";
  o.unguarded = f.mode != "guarded";
  o.keep_dumps = f.keep_dumps;
  o.root = session.root();
  Report rep;
  int code = collcheck::run_fault_table_job(o, rep, session, *f.report.events);
  if (o.root) code = finish_reports(f.report, rep, code);
  return session.agree_exit_code(code);  // every rank exits with rank 0's verdict
}

}  // namespace collcheck::cli
