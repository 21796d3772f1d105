// The collcheck command line.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <cstdio>
#include <cstring>
#include <random>
#include <fstream>
#include <sstream>
#include <cctype>
#include <string>

#include "harness/cli_util.h"
#include "harness/peer_registry.h"
#include "impl/algorithm.h"
#include "harness/data.h"
#include "harness/sweep.h"
#include "collcheck/plugin.h"
#include "properties/verify.h"
#include "harness/scenario_runner.h"
#include "faults/nemesis.h"
#include "properties/detection.h"
#include <filesystem>
#include <fmt/ranges.h>

#include "harness/crash_handler.h"
#include "harness/gloo_impl.h"
#include "harness/mpi_impl.h"
#include "harness/mpi_world.h"
#include "harness/nccl_impl.h"
#include "properties/mpi_executor.h"

namespace {

constexpr int kMaxThreadRanks = 512;
// Exit code of a run that could not happen here (no GPU for nccl): not a pass.
constexpr int kExitSkipped = 77;

// Open MPI's coll/tuned allreduce algorithms (4.1), for --mpi-algo.
constexpr const char* kMpiAllreduceAlgos[] = {"default (tuned's decision rules)", "basic_linear", "nonoverlapping",
                                              "recursive_doubling", "ring", "segmented_ring", "rabenseifner"};

void add_sweep(CLI::App& app, collcheck::SweepOptions& o, std::string& b, std::string& e, std::string& d,
               std::string& op, std::string& algo, std::string& count, std::string& data, int& check) {
  auto* s = app.add_subcommand("sweep", "Time and check all-reduce over sizes x dtypes x ops x algorithms "
                                        "(nccl-tests style table)");
  s->add_option("-b,--minbytes", b, "smallest size in bytes (K/M/G suffixes)")->capture_default_str();
  s->add_option("-e,--maxbytes", e, "largest size in bytes (K/M/G suffixes)")->capture_default_str();
  s->add_option("-f,--stepfactor", o.factor, "multiply the size by this factor each step")->capture_default_str();
  s->add_option("-N,--count", count, "run exactly this many elements instead of -b/-e");
  s->add_option("-d,--datatype", d, "dtype, comma list, or all")->capture_default_str();
  s->add_option("-o,--op", op, "sum, prod, max, min, avg, premulsum, comma list, or all")->capture_default_str();
  s->add_option("-n,--iters", o.iters, "timed iterations per row")->capture_default_str();
  s->add_option("-w,--warmup_iters", o.warmup, "untimed iterations before timing")->capture_default_str();
  s->add_option("-c,--check", check, "check results against the oracle (0 or 1)")->capture_default_str();
  s->add_option("--ranks", o.ranks, "world size (ranks as threads)")->capture_default_str();
  s->add_option("--algo", algo, collcheck::algorithm_choices() + ", comma list, or all")->capture_default_str();
  s->add_flag("--inplace", o.inplace, "in-place calls (send buffer == recv buffer)");
  s->add_option("--seed", o.seed, "seed of the input data")->capture_default_str();
  s->add_option("--data", data, "input data: exact, random, mixed, extreme, special or wrap")->capture_default_str();
  s->add_option("--scalar", o.scalar, "pre-multiplier of premulsum, converted to the element type")
      ->capture_default_str();
  s->add_flag("--no-memcpy-peer", [&o](int64_t) { o.memcpy_peer = false; },
              "skip the memcpy bandwidth peer printed after the table");
}

struct VerifyFlags {
  std::string impl = "ring";
  std::string against;
  std::string world = "threads";
  int mpi_algo = -1;
  std::string cases = "2000";
  std::string seed;
  int max_ranks = -1;  // -1: 64 for threads, the world size for MPI
  std::string max_count = "4096";
  std::string large_bytes = "1048576";
  std::string dtypes = "all";
  std::string ops = "all";
  std::string data = "all";
  double time_budget = 0;
  double timeout = 10;
  std::string isolate = "auto";
  std::string replay;
  std::string progress = "auto";
  std::string junit;
  std::string sequences = "on";
  std::string perturb = "on";
  std::string repeat;
};

void add_verify(CLI::App& app, VerifyFlags& f) {
  auto* v = app.add_subcommand("verify", "Property-based verification of an all-reduce implementation: random "
                                         "cases, shrinking, a replayable minimal counterexample");
  v->add_option("--impl", f.impl,
                "implementation under test: " + collcheck::implementation_specs())
      ->capture_default_str();
  v->add_option("--against", f.against,
                "peers to compare with, comma list of the same names (default: the other reference algorithms)");
  v->add_option("--world", f.world, "threads (ranks as threads, the default) or mpi (one rank per process, under "
                                    "mpirun)")
      ->capture_default_str();
  v->add_option("--mpi-algo", f.mpi_algo,
                "Open MPI coll/tuned allreduce algorithm for mpi: 0 default, 1 basic_linear, 2 nonoverlapping, "
                "3 recursive_doubling, 4 ring, 5 segmented_ring, 6 rabenseifner");
  v->add_option("--cases", f.cases, "number of random cases")->capture_default_str();
  v->add_option("--seed", f.seed, "seed of the case generator (default: random, printed)");
  v->add_option("--max-ranks", f.max_ranks,
                "largest world size generated; most cases stay at p <= 8, 15 % reach 9 to 16 and 3 % beyond (default: 64 for "
                "threads, every process for mpi)");
  v->add_option("--max-count", f.max_count, "largest element count generated, except the large counts")
      ->capture_default_str();
  v->add_option("--large-bytes", f.large_bytes,
                "one case in 100 draws a count near a power-of-two byte size from 64 KiB up to this, +-1 element "
                "(0: never)")
      ->capture_default_str();
  v->add_option("--dtypes", f.dtypes, "dtypes to draw from: comma list or all")->capture_default_str();
  v->add_option("--ops", f.ops, "ops to draw from: comma list or all")->capture_default_str();
  v->add_option("--data", f.data, "input distributions: exact, random, extreme, special, wrap, comma list or all")
      ->capture_default_str();
  v->add_option("--time-budget", f.time_budget, "stop drawing cases after this many seconds (0: no limit)")
      ->capture_default_str();
  v->add_option("--timeout", f.timeout, "deadline of each all-reduce call, in seconds")->capture_default_str();
  v->add_option("--isolate", f.isolate,
                "run cases in a child process so a crash or hang is diagnosed: auto (plugins), on, off")
      ->capture_default_str();
  v->add_option("--replay", f.replay,
                "run exactly the case of this replay token (printed by a failing run), or @FILE for a token in a file");
  v->add_option("--junit", f.junit, "also write the result as JUnit XML to this file (one testcase per property)");
  v->add_option("--progress", f.progress, "progress line on stderr: auto (when a terminal), on, off")
      ->capture_default_str();
  v->add_option("--sequences", f.sequences,
                "on: one case in six (p <= 16) is 2 to 4 calls on one communicator, varied one field at a time, "
                "sync and async; off: every case is one call")
      ->capture_default_str();
  v->add_option("--perturb", f.perturb,
                "on: one case in ten (2 <= p <= 16) runs the implementation's transfers with seeded, bounded "
                "random delays; off: never")
      ->capture_default_str();
  v->add_option("--repeat", f.repeat,
                "replays of a minimal failing case, to tell a steady failure from a flaky one (fails k of N; "
                "default 20); with --replay: runs of the case, failing if any run fails (default 1)");
}

int run_verify_command(const VerifyFlags& f) {
  using collcheck::UsageError;
  collcheck::VerifyOptions o;
  o.impl_spec = f.impl;
  o.cases = collcheck::parse_count(f.cases, "--cases");
  if (o.cases == 0) throw UsageError("--cases must be >= 1, got 0");
  if (f.seed.empty()) {
    o.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  } else {
    try {
      size_t pos = 0;
      o.seed = std::stoull(f.seed, &pos, 0);
      if (pos != f.seed.size() || f.seed[0] == '-') throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--seed must be a non-negative integer (decimal or 0x hex), got '{}'", f.seed));
    }
  }
  collcheck::MpiWorld* mpi = collcheck::MpiWorld::get();
  const auto kind = mpi ? collcheck::WorldKind::Mpi : collcheck::WorldKind::Threads;
  const int limit = mpi ? mpi->size() : kMaxThreadRanks;
  const int max_ranks = f.max_ranks == -1 ? (mpi ? mpi->size() : 64) : f.max_ranks;
  if (max_ranks < 1 || max_ranks > limit)
    throw UsageError(fmt::format("--max-ranks must be between 1 and {} for {}, got {}", limit,
                                 mpi ? "this MPI world (its process count)" : "the thread world", max_ranks));
  o.space.max_ranks = max_ranks;
  o.space.max_count = collcheck::parse_count(f.max_count, "--max-count");
  if (o.space.max_count > (size_t{1} << 24))
    throw UsageError(fmt::format("--max-count must be at most 16777216 (use sweep for large buffers), got {}",
                                 o.space.max_count));
  o.space.large_bytes = collcheck::parse_count(f.large_bytes, "--large-bytes");
  if (o.space.large_bytes > (size_t{1} << 28))
    throw UsageError(fmt::format("--large-bytes must be at most 268435456 (256 MiB), got {}", o.space.large_bytes));
  o.space.dtypes = collcheck::parse_dtype_list(f.dtypes, "--dtypes");
  o.space.ops = collcheck::parse_op_list(f.ops, "--ops");
  if (f.data != "all") {
    for (auto c : collcheck::parse_data_class_list(f.data, "--data")) {
      if (c == collcheck::DataClass::Mixed) throw UsageError("--data mixed is for sweep; allowed here: exact, random, extreme, special, wrap, or all");
      o.space.data.push_back(c);
    }
  }
  if (!(f.time_budget >= 0)) throw UsageError(fmt::format("--time-budget must be >= 0 seconds, got {}", f.time_budget));
  o.time_budget_s = f.time_budget;
  if (!(f.timeout > 0) || f.timeout > 86400)
    throw UsageError(fmt::format("--timeout must be in (0, 86400] seconds, got {}", f.timeout));
  if (f.isolate != "auto" && f.isolate != "on" && f.isolate != "off")
    throw UsageError(fmt::format("--isolate must be auto, on or off, got '{}'", f.isolate));
  if (f.progress != "auto" && f.progress != "on" && f.progress != "off")
    throw UsageError(fmt::format("--progress must be auto, on or off, got '{}'", f.progress));
  o.progress = f.progress == "on" || (f.progress == "auto" && ::isatty(STDERR_FILENO));
  for (const auto& [flag, value, into] : {std::tuple{"--sequences", &f.sequences, &o.space.sequences},
                                          std::tuple{"--perturb", &f.perturb, &o.space.perturb}}) {
    if (*value != "on" && *value != "off") throw UsageError(fmt::format("{} must be on or off, got '{}'", flag, *value));
    *into = *value == "on";
  }
  if (!f.repeat.empty()) {
    o.repeat = collcheck::parse_count(f.repeat, "--repeat");
    if (o.repeat < 1 || o.repeat > 100000)
      throw UsageError(fmt::format("--repeat must be in 1..100000, got {}", o.repeat));
  }
  if (!f.replay.empty()) {
    std::string token = f.replay;
    if (token[0] == '@') {  // a token too long for the command line, in a file
      std::ifstream in(token.substr(1));
      if (!in) throw UsageError(fmt::format("--replay: cannot read token file '{}': {}", token.substr(1), std::strerror(errno)));
      std::ostringstream ss;
      ss << in.rdbuf();
      token = ss.str();
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    }
    try {
      o.replay = collcheck::decode_case(token);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--replay: {}", e.what()));
    }
  }

  if (!f.junit.empty()) {  // fail before the run, not after it
    const std::string probe = f.junit + ".tmp";
    std::FILE* jf = std::fopen(probe.c_str(), "w");
    if (!jf) throw UsageError(fmt::format("--junit: cannot write '{}': {}", f.junit, std::strerror(errno)));
    std::fclose(jf);
    std::remove(probe.c_str());
  }
  // NCCL needs a build with it and a GPU; without either the run is skipped
  // (exit 77, never a pass), with the reason.
  const auto mentions_nccl = [](const std::string& specs) {
    return ("," + specs + ",").find(",nccl,") != std::string::npos;
  };
  if ((mentions_nccl(f.impl) || mentions_nccl(f.against)) && f.isolate == "on")
    throw UsageError("--isolate on cannot be used with nccl: CUDA does not survive fork() once initialised, and "
                     "collcheck initialises it to find the GPUs; run nccl without --isolate (a hung NCCL call is "
                     "aborted at its deadline)");
  if ((mentions_nccl(f.impl) || mentions_nccl(f.against)) && !collcheck::nccl_compiled_in()) {
    if (!collcheck::MpiWorld::get() || collcheck::MpiWorld::get()->rank() == 0)
      fmt::print("collcheck verify: SKIPPED (not a pass): nccl cannot run here: {}\n", *collcheck::nccl_unavailable());
    return kExitSkipped;
  }
  collcheck::ImplPtr impl;
  try {
    impl = collcheck::make_implementation(f.impl);
  } catch (const collcheck::ImplementationError& e) {
    throw UsageError(fmt::format("--impl: {}", e.what()));
  }
  collcheck::RunConfig cfg;
  cfg.impl = impl;
  try {
    cfg.peers = f.against.empty() ? collcheck::default_peers(*impl) : collcheck::make_implementations(f.against);
  } catch (const collcheck::ImplementationError& e) {
    throw UsageError(fmt::format("--against: {}", e.what()));
  }
  o.against = f.against;
  cfg.timeout = std::chrono::milliseconds(static_cast<long long>(f.timeout * 1000));
  const bool root = !mpi || mpi->rank() == 0;
  auto say = [&](const std::string& line) {
    if (root) fmt::print("{}\n", line);
  };

  // Every implementation must run in this world, and have a GPU if it needs one.
  std::vector<std::pair<std::string, collcheck::ImplPtr>> all{{"--impl", impl}};
  for (const auto& p : cfg.peers) all.emplace_back("--against", p);
  for (const auto& [flag, x] : all) {
    if (auto why = x->unsupported_world(kind)) throw UsageError(fmt::format("{} {}: {}", flag, x->name(), *why));
    if (x->name() == "nccl") {
      if (auto why = collcheck::nccl_unavailable()) {
        say(fmt::format("collcheck verify: SKIPPED (not a pass): {} nccl cannot run here: {}", flag, *why));
        return kExitSkipped;
      }
      const int gpus = collcheck::nccl_device_count();
      if (mpi) {
        // Processes that will be ranks (world rank < max_ranks), per node.
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi->rank(), MPI_INFO_NULL, &node);
        int mine = mpi->rank() < o.space.max_ranks ? 1 : 0, on_node = 0;
        MPI_Allreduce(&mine, &on_node, 1, MPI_INT, MPI_SUM, node);
        MPI_Comm_free(&node);
        const auto err = collcheck::nccl_mpi_gpu_cap_error(mpi->host(), on_node, gpus);
        int bad = err ? 1 : 0, any = 0;
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (err) throw UsageError(*err);
        if (any) throw UsageError("--world mpi with nccl: another node has more processes than GPUs (see its message)");
      }
      if (!mpi && o.space.max_ranks > gpus) {
        say(fmt::format("note: {} visible GPU(s) and NCCL needs one per rank: p <= {} (NCCL 2.28 refuses two ranks on "
                        "one GPU)", gpus, gpus));
        o.space.max_ranks = gpus;
      }
    }
  }
  // Gloo's float16 sums and products are checked against Gloo's own (buggy)
  // step over every order (finding gloo-f16-assign), which is exact only up to
  // p = 8: by default Gloo worlds stay there.
  bool uses_gloo = false;
  for (const auto& [flag, x] : all) uses_gloo |= x->name().rfind("gloo:", 0) == 0;
  if (uses_gloo && f.max_ranks == -1 && o.space.max_ranks > 8) {
    say("note: gloo: p <= 8 by default, where its float16 finding (gloo-f16-assign) is checked exactly over every "
        "reduction order; --max-ranks goes higher, and a float16 sum or product hit above p = 8 is then reported");
    o.space.max_ranks = 8;
  }
  if (f.mpi_algo >= 0) {
    bool uses_mpi = false;
    for (const auto& [flag, x] : all) uses_mpi |= x->name() == "mpi";
    if (!uses_mpi) throw UsageError("--mpi-algo applies to MPI_Allreduce: use it with --impl mpi or --against mpi");
    say(fmt::format("MPI_Allreduce algorithm asked for: {} ({}) via coll_tuned_use_dynamic_rules=1 "
                    "coll_tuned_allreduce_algorithm={}",
                    f.mpi_algo, kMpiAllreduceAlgos[f.mpi_algo], f.mpi_algo));
  }

  // Draw only what every implementation can reduce; say what is left out, and why.
  std::map<std::string, std::vector<std::string>> skipped;  // reason -> "dtype/op"
  for (auto t : o.space.dtypes)
    for (auto op : o.space.ops)
      for (const auto& [flag, x] : all)
        if (auto why = x->unsupported(t, op)) {
          o.space.excluded.emplace_back(t, op);
          skipped[fmt::format("{}: {}", x->name(), *why)].push_back(
              fmt::format("{}/{}", collcheck::dtype_name(t), collcheck::op_name(op)));
          break;
        }
  std::erase_if(o.space.dtypes, [&](collcheck::DType t) {
    for (auto op : o.space.ops)
      if (std::find(o.space.excluded.begin(), o.space.excluded.end(), std::pair{t, op}) == o.space.excluded.end())
        return false;
    return true;
  });
  std::erase_if(o.space.ops, [&](collcheck::RedOp op) {
    for (auto t : o.space.dtypes)
      if (std::find(o.space.excluded.begin(), o.space.excluded.end(), std::pair{t, op}) == o.space.excluded.end())
        return false;
    return true;
  });
  for (const auto& [why, pairs] : skipped)
    say(fmt::format("skipped {} dtype/op pair(s), {}: {}", pairs.size(), why, fmt::join(pairs, " ")));
  if (o.space.dtypes.empty() || o.space.ops.empty())
    throw UsageError("nothing left to verify: every dtype/op pair asked for is unsupported (see the lines above)");
  if (o.replay) {
    for (const auto& [flag, x] : all)
      if (auto why = x->unsupported(o.replay->dtype, o.replay->op))
        throw UsageError(fmt::format("--replay: {} cannot run this case: {}", x->name(), *why));
    if (o.replay->p > (mpi ? mpi->size() : kMaxThreadRanks))
      throw UsageError(fmt::format("--replay: the case has {} ranks and this world has {}", o.replay->p,
                                   mpi ? mpi->size() : kMaxThreadRanks));
  }

  if (mpi) {
    o.launcher = fmt::format("mpirun -np {} ", mpi->size());
    o.world_flags = " --world mpi";
    o.world_desc = fmt::format("MPI world of {} processes ({})", mpi->size(), collcheck::mpi_library_version());
    if (f.mpi_algo >= 0) o.world_flags += fmt::format(" --mpi-algo {}", f.mpi_algo);
    if (f.isolate == "on") throw UsageError("--isolate on is for the thread world; in the MPI world each rank is a process already");
    if (mpi->rank() != 0) return collcheck::serve_mpi_cases(*mpi, cfg);
    collcheck::MpiCaseExecutor exec(*mpi, cfg);
    collcheck::VerifyResult result;
    try {
      result = collcheck::run_verify(o, exec, stdout);
    } catch (const collcheck::MpiWorldLost& lost) {
      std::fflush(stdout);
      // Which case: the last one the executor ran.
      collcheck::report_unshrunk_failure(o, exec.last_case(), lost.outcome.failure, stdout);
      mpi->abort(1);
    }
    std::fflush(stdout);
    int code = result.exit_code();
    if (!f.junit.empty()) {
      try {
        collcheck::write_junit(f.junit, o, result);
      } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "collcheck: error: --junit: %s\n", e.what());
        code = result.failed ? 1 : 2;
      }
    }
    exec.stop(code);
    return code;
  }
  const bool isolate = f.isolate == "on" || (f.isolate == "auto" && impl->untrusted());
  auto exec = collcheck::make_executor(cfg, isolate);
  const auto result = collcheck::run_verify(o, *exec, stdout);
  std::fflush(stdout);
  if (!f.junit.empty()) {
    try {
      collcheck::write_junit(f.junit, o, result);
    } catch (const std::runtime_error& e) {
      // The verdict above stands; a report that could not be written is still an error.
      std::fprintf(stderr, "collcheck: error: --junit: %s\n", e.what());
      return result.failed ? 1 : 2;
    }
  }
  return result.exit_code();
}

struct ReplayFlags {
  std::string world = "threads";
  std::string file;
  std::string mode;  // "" = the scenario's
  std::string dump_dir;
};

void add_replay(CLI::App& app, ReplayFlags& f) {
  auto* r = app.add_subcommand("replay", "Run a scenario file (YAML or JSON): print the diagnosis and a per-rank "
                                         "timeline; exit 0 when its expectation holds");
  r->add_option("file", f.file, "scenario file (see examples/bugs/)")->required();
  r->add_option("--mode", f.mode, "guarded or unguarded (default: the scenario's mode)");
  r->add_option("--world", f.world, "threads (the default) or mpi (one rank per process, under mpirun -np <ranks>)")
      ->capture_default_str();
  r->add_option("--dump-dir", f.dump_dir, "where each rank's flight-recorder dump goes (unguarded mode always "
                                          "dumps, to a temporary directory by default)");
}

void print_replay(const collcheck::Scenario& s, const collcheck::ReplayResult& r) {
  std::string faults;
  for (const auto& f : s.faults) faults += (faults.empty() ? "" : ", ") + f.kind;
  fmt::print("collcheck replay: {} ({})\n", s.file, s.name);
  fmt::print("  {} ranks {}, impl {}, deadline {} s per call, {} mode; faults: {}\n", s.ranks,
             collcheck::MpiWorld::get() ? "as MPI processes" : "as threads", s.impl, s.deadline_s,
             r.guarded ? "guarded" : "unguarded", faults.empty() ? "none" : faults);
  if (!r.dump_dir.empty()) fmt::print("  flight-recorder dumps: {} (collcheck analyze {})\n", r.dump_dir, r.dump_dir);
  if (r.diagnoses.empty()) {
    fmt::print("diagnosis: none (clean run, {} results checked against the oracle)\n", r.results_checked);
  } else {
    fmt::print("diagnosis ({:.3f} s after the start{}):\n", r.time_to_diagnosis,
               r.first_failure >= 0 && !r.guarded
                   ? fmt::format("; the first call failed at {:.3f} s", r.first_failure)
                   : "");
    for (const auto& d : r.diagnoses) fmt::print("  {}\n", collcheck::format_diagnosis(d));
  }
  fmt::print("{}", collcheck::format_timeline(r.dumps));
}

int run_replay_command(const ReplayFlags& f) {
  collcheck::Scenario s;
  try {
    s = collcheck::load_scenario(f.file);
  } catch (const collcheck::ScenarioError& e) {
    throw collcheck::UsageError(e.what());
  }
  collcheck::ReplayOptions o;
  if (!f.mode.empty()) {
    if (f.mode != "guarded" && f.mode != "unguarded")
      throw collcheck::UsageError(fmt::format("--mode must be guarded or unguarded, got '{}'", f.mode));
    o.guarded = f.mode == "guarded";
  }
  o.dump_dir = f.dump_dir;
  if (s.expect && s.expect->diagnosis != "none" && !collcheck::parse_diagnosis(s.expect->diagnosis))
    throw collcheck::UsageError(fmt::format("{}: expect.diagnosis: unknown diagnosis '{}'; allowed: {}", s.file,
                                            s.expect->diagnosis, collcheck::diagnosis_choices()));
  collcheck::ReplayResult r;
  collcheck::MpiWorld* mpi = collcheck::MpiWorld::get();
  try {
    r = mpi ? collcheck::replay_scenario_mpi(s, o, *mpi) : collcheck::replay_scenario(s, o);
  } catch (const collcheck::ScenarioError& e) {
    throw collcheck::UsageError(e.what());
  }
  if (mpi && mpi->rank() != 0) return mpi->agree_exit_code(1);  // rank 0 judges; its code wins
  print_replay(s, r);
  const collcheck::ExpectSpec none{"none", {}, {}, {}, {}};
  const collcheck::ExpectSpec& e = s.expect ? *s.expect : none;
  std::string why;
  const bool ok = collcheck::expectation_holds(e, r, &why);
  fmt::print("expected: {}{}{}{} -> {}\n", e.diagnosis,
             e.ranks.empty() ? "" : fmt::format(" ranks [{}]", fmt::join(e.ranks, ", ")),
             e.seq ? fmt::format(" call #{}", *e.seq) : "",
             e.edge ? fmt::format(" edge {} -> {}", e.edge->first, e.edge->second) : "",
             ok ? "holds" : "DOES NOT HOLD: " + why);
  std::fflush(stdout);
  return mpi ? mpi->agree_exit_code(ok ? 0 : 1) : (ok ? 0 : 1);
}

int run_analyze_command(const std::string& dir) {
  std::vector<collcheck::RankDump> dumps;
  try {
    dumps = collcheck::load_dumps(dir);
  } catch (const std::runtime_error& e) {
    throw collcheck::UsageError(e.what());
  }
  collcheck::AnalysisOptions ao;
  ao.run_finished = true;
  for (const auto& d : dumps) ao.run_finished = ao.run_finished && d.reason == "end of run";
  const auto found = collcheck::analyze(dumps, ao);
  fmt::print("collcheck analyze: {} ranks from {} (dumped on: {})\n", dumps.size(), dir, dumps.front().reason);
  if (found.empty()) fmt::print("diagnosis: none\n");
  for (const auto& d : found) fmt::print("  {}\n", collcheck::format_diagnosis(d));
  fmt::print("{}", collcheck::format_timeline(dumps));
  return found.empty() ? 0 : 1;
}

struct FaultsFlags {
  std::string impl = "ring";
  int ranks = -1;  // -1: 4, or every process in the MPI world
  std::string mode = "both";
  std::string world = "threads";
  size_t random = 0;  // > 0: the detection property, this many random cases
  std::string seed = "1";
};

// The detection property as a command: `random` generated clean scenarios
// with a random fault each, replayed in this world (every MPI rank generates
// the same cases from the seed), each diagnosis compared with the fault.
int run_detection_command(const FaultsFlags& f, int p, uint64_t seed) {
  collcheck::MpiWorld* mpi = collcheck::MpiWorld::get();
  const bool root = !mpi || mpi->rank() == 0;
  if (root)
    fmt::print("collcheck faults --random {}: the detection property, {} ranks {}, seed {:#x}\n", f.random, p,
               mpi ? "as MPI processes" : "as threads", seed);
  rc::Random base(seed);
  const auto gen = collcheck::gen_detection_case(p, p);
  size_t missed = 0;
  double worst_over = 0;
  for (size_t i = 0; i < f.random; ++i) {
    const rc::Random ri = base.split();
    const collcheck::DetectionCase c = gen(ri, static_cast<int>(i % (rc::kNominalSize + 1))).value();
    const auto replay = [&](const collcheck::Scenario& s) {
      return mpi ? collcheck::replay_scenario_mpi(s, {}, *mpi) : collcheck::replay_scenario(s, {});
    };
    const collcheck::DetectionOutcome o = collcheck::check_detection(c, replay);
    if (!root) continue;
    worst_over = std::max(worst_over, o.seconds - o.limit_s);
    const std::string fault = c.fault ? c.fault->kind : "none (clean)";
    if (!o.ok) {
      ++missed;
      fmt::print("case {}: {} ({}): {}\n", i + 1, fault, c.guarded ? "guarded" : "unguarded", o.why);
      for (const auto& d : o.result.diagnoses) fmt::print("  {}\n", collcheck::format_diagnosis(d));
      // The case as a scenario file: `collcheck replay` reruns it.
      fmt::print("  the case as a scenario (replay it with collcheck replay):\n");
      std::string yaml = collcheck::scenario_to_yaml(c.scenario());
      for (size_t a = 0; a < yaml.size();) {
        const size_t b = std::min(yaml.find('\n', a), yaml.size());
        fmt::print("    {}\n", std::string_view(yaml).substr(a, b - a));
        a = b + 1;
      }
    }
  }
  int code = missed ? 1 : 0;
  if (root) {
    fmt::print("{} of {} cases diagnosed as injected (no miss, no false alarm: {}); worst time beyond the limit: "
               "{:.3f} s\n",
               f.random - missed, f.random, missed ? "NO" : "yes", worst_over);
  }
  return mpi ? mpi->agree_exit_code(code) : code;
}

int run_faults_command(const FaultsFlags& f) {
  using collcheck::UsageError;
  collcheck::MpiWorld* mpi = collcheck::MpiWorld::get();
  const int ranks = f.ranks == -1 ? (mpi ? mpi->size() : 4) : f.ranks;
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
    uint64_t seed = 0;
    try {
      size_t pos = 0;
      seed = std::stoull(f.seed, &pos, 0);
      if (pos != f.seed.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--seed must be a non-negative integer, got '{}'", f.seed));
    }
    if (ranks > 8) throw UsageError(fmt::format("--random draws worlds of at most 8 ranks, got {}", ranks));
    return run_detection_command(f, ranks, seed);
  }
  const bool root = !mpi || mpi->rank() == 0;
  const collcheck::Scenario base = collcheck::fault_table_scenario(ranks, f.impl);
  if (root) {
    fmt::print("collcheck faults: impl {}, {} ranks {}, deadline {:.3g} s per call\n", f.impl, ranks,
               mpi ? "as MPI processes" : "as threads", base.deadline_s);
    fmt::print("scenario: {}\n\n", base.name);
    fmt::print("{:<18} {:<10} {:<9} {:>12} {:>9}  {}\n", "fault", "mode", "detected", "diagnosed at", "run took",
               "diagnosis");
  }
  bool all = true;
  for (const auto& n : collcheck::nemeses()) {
    for (bool guarded : {true, false}) {
      if ((f.mode == "guarded" && !guarded) || (f.mode == "unguarded" && guarded)) continue;
      collcheck::Scenario s = base;
      s.guarded = guarded;
      s.faults = {collcheck::fault_table_instance(base, std::string(n.name))};
      s.expect = n.expected(base, s.faults.front());
      // Room for the fault's own delays (a slow link over 2(p-1) ring steps), said when it changes the deadline.
      const double delay = n.call_delay ? n.call_delay(base, s.faults.front()) : 0;
      if (2 * delay > s.deadline_s) s.deadline_s = 2 * delay;
      const auto r = mpi ? collcheck::replay_scenario_mpi(s, {}, *mpi) : collcheck::replay_scenario(s, {});
      if (!r.dump_dir.empty()) std::filesystem::remove_all(r.dump_dir);
      if (!root) continue;
      std::string why;
      const bool ok = collcheck::expectation_holds(*s.expect, r, &why);
      all = all && ok;
      const std::string what = r.diagnoses.empty() ? "none" : collcheck::format_diagnosis(r.diagnoses.front());
      fmt::print("{:<18} {:<10} {:<9} {:>11.3f}s {:>8.3f}s  {}\n", n.name, guarded ? "guarded" : "unguarded",
                 ok ? "yes" : "NO", r.time_to_diagnosis, r.seconds, what.substr(0, 150));
      if (!ok) fmt::print("{:<18} {:<10} {}\n", "", "", why);
      if (s.deadline_s != base.deadline_s)
        fmt::print("{:<18} {:<10} (deadline {:.2g} s per call for this fault: its own delays need it)\n", "", "",
                   s.deadline_s);
    }
  }
  int code = all ? 0 : 1;
  if (root) fmt::print("\n{}\n", all ? "every fault detected and named" : "SOME FAULTS WERE NOT DIAGNOSED AS INJECTED");
  return mpi ? mpi->agree_exit_code(code) : code;  // every rank exits with rank 0's verdict
}

}  // namespace

int main(int argc, char** argv) {
  // Gloo's worlds hold p(p-1) sockets each: use the open-file limit the
  // system allows (the soft limit is often 1024 of a much larger hard one).
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  CLI::App app{"collcheck: a verification and fault-injection harness for All-Reduce"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version and the collective libraries compiled in");

  collcheck::SweepOptions sweep;
  std::string b = "1K", e = "256K", d = "float32", op = "sum", algo = "ring", count, data = "mixed";
  int check = 1;
  add_sweep(app, sweep, b, e, d, op, algo, count, data, check);
  std::string sweep_world = "threads";
  app.get_subcommand("sweep")->add_option("--world", sweep_world,
                                          "threads (the default) or mpi (under mpirun; every process is a rank)")
      ->capture_default_str();
  VerifyFlags verify;
  add_verify(app, verify);
  ReplayFlags replay;
  add_replay(app, replay);
  FaultsFlags faults;
  auto* fa = app.add_subcommand("faults", "Inject every nemesis into a small training-step scenario and print fault, "
                                          "detected, diagnosis and time to diagnosis");
  fa->add_option("--impl", faults.impl, "implementation: " + collcheck::algorithm_choices() + " or plugin:<path.so>")->capture_default_str();
  fa->add_option("--ranks", faults.ranks, "world size (default: 4 as threads; every process in the MPI world)");
  fa->add_option("--mode", faults.mode, "guarded, unguarded or both")->capture_default_str();
  fa->add_option("--world", faults.world, "threads (the default) or mpi (under mpirun; every process is a rank)")
      ->capture_default_str();
  fa->add_option("--random", faults.random,
                 "run the detection property instead: this many random scenarios, each with a random fault");
  fa->add_option("--seed", faults.seed, "seed of --random")->capture_default_str();
  std::string analyze_dir;
  auto* an = app.add_subcommand("analyze", "Diagnose from the per-rank flight-recorder dumps alone "
                                            "(rank-*.json in a directory)");
  an->add_option("dir", analyze_dir, "directory with rank-<r>.json files")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& ex) {
    return app.exit(ex);
  } catch (const CLI::CallForAllHelp& ex) {
    return app.exit(ex);
  } catch (const CLI::ParseError& ex) {
    std::fprintf(stderr, "collcheck: error: %s (see --help)\n", ex.what());
    return 2;
  }

  if (version) {
    fmt::print("collcheck {}\n", COLLCHECK_VERSION);
    fmt::print("implementations:\n");
    for (const auto& k : collcheck::peer_kinds()) fmt::print("  {:<21}{}\n", k.spec, k.describe());
    return 0;
  }

  // The MPI world starts before anything else runs; every process parsed the
  // same command line, so they all reach here, or all failed above alike.
  const bool sweep_ranks_given = app.get_subcommand("sweep")->count("--ranks") > 0;
  const bool mpi_world = (app.got_subcommand("sweep") && sweep_world == "mpi") ||
                         (app.got_subcommand("verify") && verify.world == "mpi") ||
                         (app.got_subcommand("replay") && replay.world == "mpi") ||
                         (app.got_subcommand("faults") && faults.world == "mpi");
  for (const std::string* w : {&sweep_world, &verify.world, &replay.world, &faults.world})
    if (*w != "threads" && *w != "mpi") {
      std::fprintf(stderr, "collcheck: error: --world must be threads or mpi, got '%s'\n", w->c_str());
      return 2;
    }
  if (app.got_subcommand("verify") && verify.mpi_algo != -1 && (verify.mpi_algo < 0 || verify.mpi_algo > 6)) {
    std::fprintf(stderr, "collcheck: error: --mpi-algo must be 0..6 (0 default, 1 basic_linear, 2 nonoverlapping, "
                         "3 recursive_doubling, 4 ring, 5 segmented_ring, 6 rabenseifner), got %d\n", verify.mpi_algo);
    return 2;
  }
  if (mpi_world) {
    if (verify.mpi_algo >= 0) {
      // Both, or coll/tuned silently ignores the choice.
      ::setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
      ::setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", std::to_string(verify.mpi_algo).c_str(), 1);
    }
    try {
      collcheck::MpiWorld::init(&argc, &argv);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "collcheck: error: --world mpi: %s\n", ex.what());
      return 2;
    }
  } else if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE"); n && std::atoi(n) > 1) {
    std::fprintf(stderr, "collcheck: warning: started by mpirun with %s processes but without --world mpi: each "
                         "process runs its own thread world\n", n);
  }
  collcheck::install_crash_handler();
  if (auto* w = collcheck::MpiWorld::get()) {
    collcheck::set_crash_identity(fmt::format("rank {} of {} (pid {} on {})", w->rank(), w->size(), ::getpid(), w->host()));
    collcheck::set_crash_process_rank(w->rank());
  } else {
    collcheck::set_crash_identity(fmt::format("collcheck (pid {})", ::getpid()));
  }
  const int code = [&]() -> int {

  try {
    if (app.got_subcommand("sweep")) {
      sweep.min_bytes = collcheck::parse_size(b, "-b/--minbytes");
      sweep.max_bytes = collcheck::parse_size(e, "-e/--maxbytes");
      if (!count.empty()) sweep.count = collcheck::parse_count(count, "-N/--count");
      if (sweep.min_bytes > sweep.max_bytes)
        throw collcheck::UsageError(fmt::format("-b/--minbytes ({}) must not exceed -e/--maxbytes ({})",
                                                sweep.min_bytes, sweep.max_bytes));
      if (!(sweep.factor > 1.0))
        throw collcheck::UsageError(fmt::format("-f/--stepfactor must be > 1, got {}", sweep.factor));
      sweep.dtypes = collcheck::parse_dtype_list(d, "-d/--datatype");
      sweep.ops = collcheck::parse_op_list(op, "-o/--op");
      sweep.algos = collcheck::parse_algo_list(algo, "--algo");
      if (auto* w = collcheck::MpiWorld::get()) {
        if (sweep_ranks_given && sweep.ranks != w->size())
          throw collcheck::UsageError(fmt::format("--ranks is {}, but mpirun started {} processes; in the MPI world "
                                                  "every process is a rank", sweep.ranks, w->size()));
        sweep.ranks = w->size();
      }
      if (sweep.ranks < 1 || sweep.ranks > kMaxThreadRanks)
        throw collcheck::UsageError(fmt::format("--ranks must be between 1 and {} for the thread world, got {}",
                                                kMaxThreadRanks, sweep.ranks));
      if (sweep.iters < 1) throw collcheck::UsageError(fmt::format("-n/--iters must be >= 1, got {}", sweep.iters));
      if (sweep.warmup < 0)
        throw collcheck::UsageError(fmt::format("-w/--warmup_iters must be >= 0, got {}", sweep.warmup));
      if (check != 0 && check != 1) throw collcheck::UsageError(fmt::format("-c/--check must be 0 or 1, got {}", check));
      sweep.check = check == 1;
      auto dc = collcheck::parse_data_class(data);
      if (!dc) throw collcheck::UsageError(
            fmt::format("unknown --data '{}'; allowed: {}", data, collcheck::data_class_choices()));
      sweep.data = *dc;
      int sweep_code = collcheck::run_sweep(sweep, stdout).exit_code();
      if (auto* w = collcheck::MpiWorld::get()) {  // every rank exits with rank 0's verdict
        std::fflush(stdout);
        sweep_code = w->agree_exit_code(sweep_code);
      }
      return sweep_code;
    }
    if (app.got_subcommand("verify")) return run_verify_command(verify);
    if (app.got_subcommand("replay")) return run_replay_command(replay);
    if (app.got_subcommand("analyze")) return run_analyze_command(analyze_dir);
    if (app.got_subcommand("faults")) return run_faults_command(faults);
    std::fprintf(stderr, "collcheck: error: no subcommand given; allowed: verify, replay, analyze, faults, sweep (see --help)\n");
    return 2;
  } catch (const collcheck::UsageError& ex) {
    // In the MPI world every rank finds the same error; rank 0 says it.
    if (!collcheck::MpiWorld::get() || collcheck::MpiWorld::get()->rank() == 0)
      std::fprintf(stderr, "collcheck: error: %s\n", ex.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "collcheck: error: out of memory for the requested sizes and --ranks\n");
    return 2;
  }
  }();
  if (mpi_world) collcheck::MpiWorld::get()->finalize();
  return code;
}
