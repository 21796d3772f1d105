// collcheck verify: property-based verification of an implementation.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include "harness/check/oracle.h"
#include "harness/cli/commands.h"
#include "harness/model/atomic_file.h"
#include "harness/model/yaml_input.h"
#include "harness/model/size.h"
#include "harness/peers/mpi_impl.h"
#include "harness/peers/peer_registry.h"
#include "harness/world/mpi_world.h"
#include "properties/verify.h"

namespace collcheck::cli {

namespace {
// What the random cases are drawn from, and how they are checked.
void add_case_space_flags(CLI::App* v, VerifyFlags& f) {
  v->add_option("--cases", f.cases, "number of random cases")->capture_default_str();
  v->add_option("--seed", f.seed, "seed of the case generator (default: random, printed)");
  v->add_option("--max-ranks", f.max_ranks,
                "largest world size generated; most cases stay at p <= 8, 15 % reach 9 to 16 and 3 % beyond (default: 64 for "
                "threads, every process for mpi)");
  v->add_option("--max-count", f.max_count, "largest element count generated, except the large counts")
      ->capture_default_str();
  v->add_option("--large-bytes", f.large_bytes,
                "(a size: 1M, 64K, ...) one case in 100 draws a count near a power-of-two byte size from 64 KiB up to this, +-1 element "
                "(0: never)")
      ->capture_default_str();
  v->add_option("--dtypes", f.dtypes, "dtypes to draw from: comma list or all")->capture_default_str();
  v->add_option("--ops", f.ops, "ops to draw from: comma list or all")->capture_default_str();
  v->add_option("--data", f.data, "input distributions: exact, random, extreme, special, wrap, comma list or all")
      ->capture_default_str();
  v->add_option("--one-of-ranks", f.one_of_ranks,
                 "float sums and products of up to N ranks are checked against the exact set of every reduction "
                 "order's outcome (bitwise at p = 2), above N within the error bound: 4 to 8 (always 4; 5 where the "
                 "set fits a cost budget; each rank more costs about 4x)")
      ->capture_default_str();
  v->add_option("--sequences", f.sequences,
                "on: one case in six (p <= 16) is 2 to 4 calls on one communicator, varied one field at a time, "
                "sync and async; off: every case is one call")
      ->capture_default_str();
  v->add_option("--perturb", f.perturb,
                "on: one case in ten (2 <= p <= 16) runs the implementation's transfers with seeded, bounded "
                "random delays; off: never")
      ->capture_default_str();
}
}  // namespace

void add_verify(CLI::App& app, VerifyFlags& f) {
  auto* v = app.add_subcommand("verify", "Property-based verification of an all-reduce implementation: random "
                                         "cases, shrinking, a replayable minimal counterexample");
  v->add_option("--impl", f.impl,
                "implementation under test: " + collcheck::implementation_specs())
      ->capture_default_str();
  v->add_option("--against", f.against,
                "peers to compare with, comma list of the same names (default: the other reference algorithms)");
  add_sim_flags(v, f.sim);
  v->add_option("--schedules", f.schedules, "--world sim: run each case under K schedules (races found by search)")
      ->capture_default_str();
  v->add_option("--jobs", f.jobs,
                "--world sim, reference algorithms: run N cases side by side, each in a world of its own (0: one per "
                "core, at most 8, as memory allows); the output is the same for every N")
      ->capture_default_str();
  v->add_option("--world", f.world, "sim (ranks as fibers in virtual time: one seed, one output, however busy the host; the default for the reference algorithms, while plugins and peer libraries run as threads unless sim is named), threads or mpi (one rank per process, under "
                                    "mpirun)")
      ->capture_default_str();
  v->add_option("--mpi-algo", f.mpi_algo,
                "Open MPI coll/tuned allreduce algorithm for mpi: " + mpi_algo_choices());
  add_metrics_flags(v, f.metrics, "collcheck_verify", false);
  add_case_space_flags(v, f);
  v->add_option("--time-budget", f.time_budget, "stop drawing cases after this many seconds (0: no limit)")
      ->capture_default_str();
  v->add_option("--timeout", f.timeout, "deadline of each all-reduce call, in seconds")->capture_default_str();
  v->add_option("--isolate", f.isolate,
                "run cases in a child process so a crash or hang is diagnosed: auto (plugins), on, off")
      ->capture_default_str();
  v->add_option("--replay", f.replay,
                "run exactly the case of this replay token (printed by a failing run), or @FILE for a token in a file");
  v->add_option("--junit", f.junit, "also write the result as JUnit XML to this file (one testcase per property)");
  add_progress_flag(v, f.progress);
  v->add_option("--repeat", f.repeat,
                "replays of a minimal failing case, to tell a steady failure from a flaky one (fails k of N; "
                "default 20); with --replay: runs of the case, failing if any run fails (default 1)");
  add_report_flag(v, f.report);
}

namespace {
int output_lost_unless(bool ok, int code) { return ok || code != 0 ? code : collcheck::kExitOutputLost; }
}  // namespace

namespace {
using collcheck::UsageError;

// The flags of the case space, the budget and the replay line, checked.
collcheck::VerifyOptions verify_options(VerifyFlags& f, const collcheck::Session& session) {
  collcheck::VerifyOptions o;
  o.impl_spec = f.impl;
  o.cases = collcheck::parse_count(f.cases, "--cases");
  if (o.cases == 0) throw UsageError("--cases must be >= 1, got 0");
  o.seed = f.seed.empty() ? (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()
                         : parse_seed(f.seed, "--seed");
  const int limit = session.max_ranks(kMaxThreadRanks);
  const int max_ranks = f.max_ranks == -1 ? (session.max_ranks(64)) : f.max_ranks;
  if (max_ranks < 1 || max_ranks > limit)
    throw UsageError(fmt::format("--max-ranks must be between 1 and {} for {}, got {}", limit,
                                 session.is_mpi() ? "this MPI world (its process count)" : "the thread world", max_ranks));
  o.space.max_ranks = max_ranks;
  o.space.max_count = collcheck::parse_count(f.max_count, "--max-count");
  if (o.space.max_count > (size_t{1} << 24))
    throw UsageError(fmt::format("--max-count must be at most 16777216 (use sweep for large buffers), got {}",
                                 o.space.max_count));
  o.space.large_bytes = collcheck::parse_size(f.large_bytes, "--large-bytes");
  if (o.space.large_bytes > (size_t{1} << 28))
    throw UsageError(fmt::format("--large-bytes must be at most 268435456 (256M), got {}", o.space.large_bytes));
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
  o.should_stop = f.should_stop;
  // Deadlines count in milliseconds: a shorter one would be 0 ms, which no call meets.
  if (!(f.timeout >= 0.001) || f.timeout > 86400)
    throw UsageError(fmt::format("--timeout must be in [0.001, 86400] seconds, got {}", f.timeout));
  // A failure's replay line runs under the same deadline.
  if (f.timeout != VerifyFlags{}.timeout) o.run_flags += fmt::format(" --timeout {}", f.timeout);
  if (f.one_of_ranks < kOneOfAlwaysRanks || f.one_of_ranks > kOneOfMaxRanks)
    throw UsageError(fmt::format("--one-of-ranks must be {} to {}, got {}", kOneOfAlwaysRanks, kOneOfMaxRanks,
                                 f.one_of_ranks));
  set_one_of_ranks(f.one_of_ranks);  // before any check, and before the isolated child is forked
  if (f.one_of_ranks != kOneOfDefaultRanks) o.run_flags += fmt::format(" --one-of-ranks {}", f.one_of_ranks);
  if (f.isolate != "auto" && f.isolate != "on" && f.isolate != "off")
    throw UsageError(fmt::format("--isolate must be auto, on or off, got '{}'", f.isolate));
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
  return o;
}

// --replay TOKEN or @FILE (several tokens, one per line: the earlier cases
// run first, once each, and the last is the case).
void read_replay_tokens(const VerifyFlags& f, collcheck::VerifyOptions& o) {
  std::string token = f.replay;
  if (token[0] == '@') {  // a token too long for the command line, in a file (bounded: a token is a few KB)
    token = collcheck::read_input_file<UsageError>(token.substr(1), size_t{1} << 20, "a file holding a replay token",
                                                   "no flag");
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  }
  // A file may hold several tokens, one per line (a failure that depends on
  // earlier cases): those run first, once each, and the last is the case.
  std::vector<std::string> tokens;
  for (size_t at = 0; at <= token.size();) {
    const size_t nl = std::min(token.find('\n', at), token.size());
    std::string t = token.substr(at, nl - at);
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    if (!t.empty()) tokens.push_back(std::move(t));
    at = nl + 1;
  }
  if (tokens.empty()) throw UsageError("--replay: no token given");
  if (tokens.size() > 1 && f.replay[0] != '@')
    throw UsageError("--replay: one token on the command line; several (one per line) only in a file, @FILE");
  for (size_t k = 0; k < tokens.size(); ++k) {
    try {
      Case c = collcheck::decode_case(tokens[k]);
      if (k + 1 < tokens.size()) o.replay_before.push_back(std::move(c));
      else o.replay = std::move(c);
    } catch (const std::invalid_argument& e) {
      throw UsageError(tokens.size() > 1 ? fmt::format("--replay: line {} of {}: {}", k + 1, f.replay.substr(1), e.what())
                                         : fmt::format("--replay: {}", e.what()));
    }
  }
}




}  // namespace

// The flags as a job: the case space, the replay tokens, the peers, the world's limits.
collcheck::VerifyJob verify_job(VerifyFlags& f, const collcheck::Session& session) {
  collcheck::VerifyJob job;
  job.o = verify_options(f, session);
  if (!f.replay.empty()) read_replay_tokens(f, job.o);
  job.impl = f.impl;
  job.against = f.against;
  job.mpi_algo = f.mpi_algo;
  job.max_ranks_given = f.max_ranks != -1;
  job.isolate = f.isolate;
  job.timeout_s = f.timeout;
  if (f.schedules < 1 || f.schedules > 1000)
    throw UsageError(fmt::format("--schedules must be 1 to 1000, got {}", f.schedules));
  job.schedules = f.schedules;
  if (f.jobs < 0 || f.jobs > 256) throw UsageError(fmt::format("--jobs must be 0 (one per core) to 256, got {}", f.jobs));
  job.jobs = f.jobs;
  return job;
}

int run_verify_command(VerifyFlags& f, const collcheck::Session& session) {
  collcheck::VerifyJob job = verify_job(f, session);
  check_metrics_flags(f.metrics);
  if (!f.junit.empty()) {  // --junit PATH is --report junit=PATH; fail before the run, not after it
    try {
      check_report_path(f.junit, "--junit");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    f.report.requests.push_back({"junit", f.junit});
  }
  // A replay token too long for a command line goes next to the reports.
  if (!f.report.requests.empty())
    job.o.token_dir = std::filesystem::absolute(f.report.requests.front().path).parent_path().string();
  add_progress_sink(f.report, session, f.progress, "verify", "cases");
  auto metrics = start_metrics(f.metrics, session, *f.report.events);  // counts the job's unit event
  return collcheck::run_verify_job(job, session, *f.report.events,
                                   [&](const collcheck::VerifyOptions& o, const collcheck::VerifyResult& r) {
                                     std::fflush(stdout);
                                     const bool metrics_ok = finish_metrics(f.metrics, metrics.get());
                                     return finish_reports(f.report, collcheck::verify_report(o, r),
                                                           output_lost_unless(metrics_ok, r.exit_code()));
                                   });
}

}  // namespace collcheck::cli
