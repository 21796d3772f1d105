// collcheck sweep: the nccl-tests style table of sizes x dtypes x ops x algorithms.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "harness/cli/commands.h"
#include "harness/model/atomic_file.h"
#include "harness/model/size.h"
#include "harness/peers/peer_registry.h"
#include "impl/algorithm.h"

namespace collcheck::cli {

void add_sweep(CLI::App& app, SweepFlags& f) {
  SweepJob& j = f.job;
  SweepOptions& o = j.o;
  auto [b, e, d, op, algo, count, data] = std::tie(j.min_bytes, j.max_bytes, j.dtypes, j.ops, j.algos, j.count, j.data);
  int& check = j.check;
  auto* s = app.add_subcommand("sweep", "Time and check all-reduce over sizes x dtypes x ops x algorithms "
                                        "(nccl-tests style table)");
  s->add_option("-b,--minbytes", b, "smallest size in bytes (K/M/G suffixes)")->capture_default_str();
  s->add_option("-e,--maxbytes", e, "largest size in bytes (K/M/G suffixes)")->capture_default_str();
  s->add_option("-f,--stepfactor", o.factor, "multiply the size by this factor each step")->capture_default_str();
  s->add_option("-N,--count", count, "run exactly this many elements instead of -b/-e");
  s->add_option("-d,--datatype", d, "dtype, comma list, or all")->capture_default_str();
  s->add_option("-o,--op", op, "sum, prod, max, min, avg, premulsum, comma list, or all")->capture_default_str();
  s->add_option("-n,--iters", o.iters, "timed iterations per row")->capture_default_str();
  s->add_option("--reps", o.reps, "timed repetitions of -n iterations per row, one busbw sample each (the gate "
                                 "compares rows over at least 9)")
      ->capture_default_str();
  add_metrics_flags(s, f.metrics, "collcheck_sweep", false);
  s->add_option("--json", f.json, "also write the rows as JSON to FILE (nccl-tests' field names, busbw_samples)");
  s->add_option("-w,--warmup_iters", o.warmup, "untimed iterations before timing")->capture_default_str();
  s->add_option("-c,--check", check, "check results against the oracle (0 or 1)")->capture_default_str();
  s->add_option("--timeout", j.timeout_s, "deadline of each all-reduce call, in seconds")->capture_default_str();
  s->add_option("--ranks", o.ranks, "world size (ranks as threads)")->capture_default_str();
  s->add_option("--algo", algo, algorithm_choices() + ", all, or plugin:<path.so>, comma list")
      ->capture_default_str();
  s->add_option("--ranks-per-node", o.ranks_per_node,
                "nodes of this many consecutive ranks, simulated (the hierarchical algorithm follows them); "
                "default: threads one node, MPI its hosts (MPI_Comm_split_type)");
  s->add_option("--inter-node-latency-us", o.inter_latency_us,
                "slow_link nemesis on every edge between two nodes: microseconds added to each transfer");
  s->add_option("--inter-node-bandwidth-mbps", o.inter_bandwidth_mbps,
                "slow_link nemesis on every edge between two nodes: bandwidth cap in MB/s (0: none)");
  s->add_option("--against", j.against,
                "peers timed on the same rows, comma list: gloo:<algo> (ranks as threads), mpi (under mpirun); "
                "prints each --algo's busbw over theirs");
  s->add_flag("--inplace", o.inplace, "in-place calls (send buffer == recv buffer)");
  s->add_option("--seed", j.seed, "seed of the input data (decimal or 0x hex)")->capture_default_str();
  s->add_option("--data", data, "input data: exact, random, mixed, extreme, special or wrap")->capture_default_str();
  s->add_option("--scalar", o.scalar, "pre-multiplier of premulsum, converted to the element type")
      ->capture_default_str();
  s->add_flag("--no-memcpy-peer", [&o](int64_t) { o.memcpy_peer = false; },
              "skip the memcpy bandwidth peer printed after the table");
  add_sim_flags(s, f.sim);
  s->add_option("--world", f.world, "sim (ranks as fibers in virtual time: one seed, one output, however busy the host), threads (the default) or mpi (under mpirun; every process is a rank)")
      ->capture_default_str();
  add_report_flag(s, f.report);
}
int run_sweep_command(SweepFlags& f, const Session& session) {
  check_metrics_outputs(f.metrics);
  if (!f.json.empty()) {
    try {
      check_report_path(f.json, "--json");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  const SweepOptions sweep = plan_sweep(f.job, session);
  auto metrics = start_metrics(f.metrics, session, *f.report.events);  // counts the row events
  if (!f.json.empty() && session.root()) f.report.events->add(sweep_json_sink(f.json, sweep, session, COLLCHECK_VERSION));
  Report rep;
  int code = run_sweep_job(sweep, session, *f.report.events, rep);
  // The rows ran; an output that did not land is not a pass (exit 5).
  if (!finish_metrics(f.metrics, metrics.get(), *f.report.events) && code == 0) code = kExitOutputLost;
  if (session.root()) code = finish_reports(f.report, rep, code);
  std::fflush(stdout);
  return session.agree_exit_code(code);  // every rank exits with rank 0's verdict
}

}  // namespace collcheck::cli
