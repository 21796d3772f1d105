// collcheck sweep as a job (sweep_job.h): the flags checked into the
// sweep's options, and the run's verdicts.
#include "harness/run/sweep_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "harness/model/size.h"
#include "harness/model/user_values.h"
#include "harness/peers/peer_registry.h"
#include "harness/session/session.h"
#include "impl/algorithm.h"

namespace collcheck {

namespace {

// --algo and --against: the reference algorithms by name (or all), and any
// implementation --impl takes (plugin:x.so, gloo:ring, ...); each must exist,
// run on this machine and in this world.
void admit_sweep_impls(SweepJob& f, const Session& session) {
  SweepOptions& sweep = f.o;
  sweep.algos.clear();
  auto split = [](const std::string& list) {
    std::vector<std::string> v;
    size_t start = 0;
    for (size_t comma; (comma = list.find(',', start)) != std::string::npos; start = comma + 1)
      v.push_back(list.substr(start, comma - start));
    v.push_back(list.substr(start));
    return v;
  };
  // Every implementation named must exist, run on this machine and in this world.
  auto admit = [&](const std::string& a, const char* flag) {
    collcheck::ImplPtr x;
    try {
      x = collcheck::make_implementation(a);
    } catch (const collcheck::ImplementationError& e) {
      throw UsageError(fmt::format("{}: {}", flag, e.what()));
    }
    if (auto why = x->unavailable()) throw UsageError(fmt::format("{} {}: cannot run here: {}", flag, a, *why));
    if (auto why = x->unsupported_world(session.kind()))
      throw UsageError(fmt::format("{} {}: cannot run in the {} world: {}", flag, a, session.is_mpi() ? "MPI" : "thread", *why));
    // NCCL's communicators per world are not renewed between the sweep's
    // timed and checked runs yet.
    if (a == "nccl") throw UsageError(fmt::format("{} nccl: the sweep does not time NCCL yet; use verify", flag));
  };
  for (const auto& a : f.algos == "all" ? parse_algo_list(f.algos, "--algo") : split(f.algos)) {
    admit(a, "--algo");
    sweep.algos.push_back(a);
  }
  sweep.against.clear();
  if (!f.against.empty())
    for (const auto& a : split(f.against)) {
      admit(a, "--against");
      if (std::find(sweep.algos.begin(), sweep.algos.end(), a) != sweep.algos.end() ||
          std::find(sweep.against.begin(), sweep.against.end(), a) != sweep.against.end())
        throw UsageError(fmt::format("--against {}: already swept (--algo or --against name it twice)", a));
      sweep.against.push_back(a);
    }
}

// The world's size and its nodes: --ranks against mpirun's processes,
// --ranks-per-node, and the slow inter-node edges (which need two nodes).
void check_sweep_world(SweepOptions& sweep, bool ranks_given, const Session& session) {
  if (session.is_mpi()) {
    if (ranks_given && sweep.ranks != session.processes())
      throw UsageError(fmt::format("--ranks is {}, but mpirun started {} processes; in the MPI world every process "
                                   "is a rank", sweep.ranks, session.processes()));
    sweep.ranks = session.processes();
  }
  if (sweep.ranks < 1 || sweep.ranks > kMaxThreadRanks)
    throw UsageError(fmt::format("--ranks must be between 1 and {} for the thread world, got {}", kMaxThreadRanks,
                                 sweep.ranks));
  if (sweep.ranks_per_node < 0 || sweep.ranks_per_node > sweep.ranks)
    throw UsageError(fmt::format("--ranks-per-node must be between 1 and --ranks ({}), got {}", sweep.ranks,
                                 sweep.ranks_per_node));
  if (!(sweep.inter_latency_us >= 0 && sweep.inter_latency_us <= 1e6))
    throw UsageError(fmt::format("--inter-node-latency-us must be in [0, 1000000], got {}", sweep.inter_latency_us));
  if (!(sweep.inter_bandwidth_mbps >= 0 && sweep.inter_bandwidth_mbps <= 1e6))
    throw UsageError(fmt::format("--inter-node-bandwidth-mbps must be in [0, 1000000] (0: no cap), got {}",
                                 sweep.inter_bandwidth_mbps));
  if (sweep.inter_latency_us > 0 || sweep.inter_bandwidth_mbps > 0) {
    int hosts = 1;
    if (session.is_mpi()) {
      std::vector<int> ids = session.nodes();
      std::sort(ids.begin(), ids.end());
      hosts = static_cast<int>(std::unique(ids.begin(), ids.end()) - ids.begin());
    }
    const bool several = sweep.ranks_per_node > 0 ? sweep.ranks_per_node < sweep.ranks : hosts > 1;
    if (!several)
      throw UsageError(fmt::format("--inter-node-latency-us/--inter-node-bandwidth-mbps slow the edges between nodes, "
                                   "and all {} ranks are on one node: give --ranks-per-node below --ranks",
                                   sweep.ranks));
  }
}

// Refuse up front, before the header, what cannot fit this machine's memory.
void refuse_unless_sweep_fits(const SweepOptions& sweep, const Session& session) {
  // A row holds, per rank, the inputs, their pristine copies and the framed
  // outputs, and the check reads them all (about 3.4 times the row's bytes per
  // rank, measured with -b 1G -e 1G --ranks 4: 13.6 GB); 4 times, to be safe.
  size_t es = 1;
  for (DType t : sweep.dtypes) es = std::max(es, dtype_size(t));
  const uint64_t row_bytes = sweep.count ? checked_mul(*sweep.count, es).value_or(~uint64_t{0}) : sweep.max_bytes;
  const uint64_t here = static_cast<uint64_t>(session.ranks_here(sweep.ranks));  // ranks in this process
  refuse_unless_fits(session, checked_mul(row_bytes, 4 * here).value_or(~uint64_t{0}), [&](uint64_t have) {
    return fmt::format("the largest row ({} bytes per rank, {} rank(s) in this process) needs about {} (4 x ranks x "
                       "bytes: inputs, their pristine copies, outputs and the check); {} is available: the largest "
                       "that fits is {}",
                       row_bytes, here, format_bytes(checked_mul(row_bytes, 4 * here).value_or(~uint64_t{0})),
                       format_bytes(have),
                       sweep.count ? fmt::format("-N {}", have / (4 * here * es)) : fmt::format("-e {}", have / (4 * here)));
  });
}

}  // namespace

SweepOptions plan_sweep(SweepJob& f, const Session& session) {
  SweepOptions& sweep = f.o;
  sweep.min_bytes = parse_size(f.min_bytes, "-b/--minbytes");
  sweep.max_bytes = parse_size(f.max_bytes, "-e/--maxbytes");
  if (!f.count.empty()) sweep.count = parse_count(f.count, "-N/--count");
  if (sweep.min_bytes > sweep.max_bytes)
    throw UsageError(fmt::format("-b/--minbytes ({}) must not exceed -e/--maxbytes ({})", sweep.min_bytes,
                                 sweep.max_bytes));
  if (!(sweep.factor > 1.0)) throw UsageError(fmt::format("-f/--stepfactor must be > 1, got {}", sweep.factor));
  if (!(f.timeout_s >= 0.001) || f.timeout_s > 86400)
    throw UsageError(fmt::format("--timeout must be in [0.001, 86400] seconds, got {}", f.timeout_s));
  sweep.timeout = std::chrono::milliseconds(static_cast<long long>(f.timeout_s * 1000));
  sweep.dtypes = parse_dtype_list(f.dtypes, "-d/--datatype");
  sweep.ops = parse_op_list(f.ops, "-o/--op");
  admit_sweep_impls(f, session);
  sweep.seed = parse_seed(f.seed, "--seed");
  if (!std::isfinite(sweep.scalar) || std::fabs(sweep.scalar) > 1e30)
    throw UsageError(fmt::format("--scalar must be a finite number of magnitude at most 1e30, got {}", sweep.scalar));
  if (sweep.count)
    for (DType t : sweep.dtypes)
      if (auto why = count_problem(*sweep.count, t); !why.empty()) throw UsageError("-N/--count: " + why);
  check_sweep_world(sweep, f.ranks_given, session);
  if (sweep.iters < 1) throw UsageError(fmt::format("-n/--iters must be >= 1, got {}", sweep.iters));
  if (sweep.reps < 1 || sweep.reps > 1000) throw UsageError(fmt::format("--reps must be in 1..1000, got {}", sweep.reps));
  if (sweep.warmup < 0) throw UsageError(fmt::format("-w/--warmup_iters must be >= 0, got {}", sweep.warmup));
  if (f.check != 0 && f.check != 1) throw UsageError(fmt::format("-c/--check must be 0 or 1, got {}", f.check));
  sweep.check = f.check == 1;
  auto dc = parse_data_class(f.data);
  if (!dc) throw UsageError(fmt::format("unknown --data '{}'; allowed: {}", f.data, data_class_choices()));
  sweep.data = *dc;
  refuse_unless_sweep_fits(sweep, session);
  return sweep;
}

int run_sweep_job(const SweepOptions& sweep, const Session& session, Events& ev, Report& rep) {
  const auto start = Clock::now();
  const SweepResult result = run_sweep(sweep, ev, session);
  if (!session.root()) return result.exit_code();
  // One verdict per row: its results against the oracle (with -c 1).
  rep.command = "sweep";
  rep.suite = fmt::format("collcheck sweep {} ranks", sweep.ranks);
  rep.properties = {{"seed", std::to_string(sweep.seed)}, {"data", std::string(data_class_name(sweep.data))},
                    {"placement", sweep.inplace ? "in-place" : "out-of-place"}};
  for (const auto& row : result.rows) {
    ReportCase c;
    c.name = fmt::format("{} {} {} {} B", row.algo, dtype_name(row.dtype), op_name(row.op), row.bytes);
    c.seconds = row.time_us / 1e6;
    c.detail = fmt::format("count {}, time {:.1f} us, algbw {:.3f} GB/s, busbw {:.3f} GB/s, #wrong {}, maxerr {:.3g}",
                           row.count, row.time_us, row.algbw, row.busbw, row.wrong, row.max_err_units);
    if (!row.skipped.empty()) {
      c.status = ReportCase::Status::Skipped;
      c.message = "skipped: " + row.skipped;
    } else if (!sweep.check) {
      c.status = ReportCase::Status::Skipped;
      c.message = "not checked (-c 0)";
    } else if (row.wrong > 0 || !row.error.empty()) {
      c.status = ReportCase::Status::Failed;
      c.message = fmt::format("{} wrong: {}", row.wrong, row.error);
    }
    rep.cases.push_back(std::move(c));
  }
  rep.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result.exit_code();
}

}  // namespace collcheck
