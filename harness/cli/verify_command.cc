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
                "Open MPI coll/tuned allreduce algorithm for mpi: " + mpi_algo_choices());
  add_metrics_flags(v, f.metrics, "collcheck_verify", false);
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
  v->add_option("--time-budget", f.time_budget, "stop drawing cases after this many seconds (0: no limit)")
      ->capture_default_str();
  v->add_option("--timeout", f.timeout, "deadline of each all-reduce call, in seconds")->capture_default_str();
  v->add_option("--one-of-ranks", f.one_of_ranks,
                 "float sums and products of up to N ranks are checked against the exact set of every reduction "
                 "order's outcome (bitwise at p = 2), above N within the error bound: 4 to 8 (always 4; 5 where the "
                 "set fits a cost budget; each rank more costs about 4x)")
      ->capture_default_str();
  v->add_option("--isolate", f.isolate,
                "run cases in a child process so a crash or hang is diagnosed: auto (plugins), on, off")
      ->capture_default_str();
  v->add_option("--replay", f.replay,
                "run exactly the case of this replay token (printed by a failing run), or @FILE for a token in a file");
  v->add_option("--junit", f.junit, "also write the result as JUnit XML to this file (one testcase per property)");
  add_progress_flag(v, f.progress);
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
  add_report_flag(v, f.report);
}

namespace {
// At the end of a run: its cases, passed and failed, by property.
bool export_verify_metrics(const VerifyFlags& f, const collcheck::VerifyResult& r, const collcheck::Session& session) {
  auto m = start_metrics(f.metrics, session);
  if (!m) return true;
  const bool failed = r.failed || r.harness_error;
  m->unit(f.impl, "verify", "", failed ? r.cases_run - 1 : r.cases_run);
  if (failed) m->unit(f.impl, "verify", r.harness_error ? "harness" : r.failure.property, 1);
  return finish_metrics(f.metrics, m.get());
}
int output_lost_unless(bool ok, int code) { return ok || code != 0 ? code : collcheck::kExitOutputLost; }
}  // namespace

namespace {
using collcheck::UsageError;
using Say = std::function<void(const std::string&)>;
using Impls = std::vector<std::pair<std::string, collcheck::ImplPtr>>;

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
  add_progress_sink(f.report, session, f.progress, "verify", "cases");
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

// Every implementation must run in this world and on this machine (a GPU
// library needs its GPUs; without them the run is skipped, exit 77, never a
// pass), and fit the ranks asked for. nullopt: admitted.
std::optional<int> admit_implementations(const VerifyFlags& f, const collcheck::Session& session, const Impls& all,
                                         collcheck::VerifyOptions& o, const Say& say) {
  for (const auto& [flag, x] : all)
    if (auto why = x->no_fork(); why && f.isolate == "on")
      throw UsageError(fmt::format("--isolate on cannot be used with {}: {}", x->name(), *why));
  for (const auto& [flag, x] : all) {
    if (auto why = x->unavailable()) {
      say(fmt::format("collcheck verify: SKIPPED (not a pass): {} {} cannot run here: {}", flag, x->name(), *why));
      return kExitSkipped;
    }
  }
  for (const auto& [flag, x] : all) {
    if (auto why = x->unsupported_world(session.kind())) throw UsageError(fmt::format("{} {}: {}", flag, x->name(), *why));
    try {
      x->fit_world(session.mpi(), o.space.max_ranks, say);
    } catch (const collcheck::ImplementationError& e) {
      throw UsageError(e.what());
    }
  }
  return std::nullopt;
}

// The per-peer limits (Gloo's p <= 8, --mpi-algo's peer), then the dtype/op
// pairs every implementation can reduce, and the replay's case against them.
void restrict_to_what_runs(const VerifyFlags& f, const collcheck::Session& session, const Impls& all,
                           collcheck::VerifyOptions& o, const Say& say) {
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
  std::vector<collcheck::ImplPtr> impls;
  for (const auto& [flag, x] : all) impls.push_back(x);
  const auto skipped = collcheck::restrict_space(o.space, impls);
  for (const auto& [why, pairs] : skipped)
    say(fmt::format("skipped {} dtype/op pair(s), {}: {}", pairs.size(), why, fmt::join(pairs, " ")));
  if (o.space.dtypes.empty() || o.space.ops.empty())
    throw UsageError("nothing left to verify: every dtype/op pair asked for is unsupported (see the lines above)");
  if (o.replay) {
    std::vector<const collcheck::Case*> every{&*o.replay};
    for (const auto& b : o.replay_before) every.push_back(&b);
    for (const collcheck::Case* c : every) {
      for (const auto& [flag, x] : all)
        if (auto why = x->unsupported(c->dtype, c->op))
          throw UsageError(fmt::format("--replay: {} cannot run this case: {}", x->name(), *why));
      if (c->p > (session.max_ranks(kMaxThreadRanks)))
        throw UsageError(fmt::format("--replay: the case has {} ranks and this world has {}", c->p,
                                     session.max_ranks(kMaxThreadRanks)));
    }
  }
}

// Refuse up front what the largest case drawn could not fit (issue 13).
void refuse_unless_verify_fits(const collcheck::Session& session, const collcheck::VerifyOptions& o, size_t npeers) {
  const int here_max = session.ranks_here(o.space.max_ranks);
  if (o.replay) {
    const uint64_t need = collcheck::case_memory_needed(*o.replay, session.ranks_here(o.replay->p), npeers);
    refuse_unless_fits(session, need, [&](uint64_t have) {
      return fmt::format("--replay: the case needs about {} in this process ((11 + {} peer(s)) x its buffer, per "
                         "rank); {} is available",
                         collcheck::format_bytes(need), npeers, collcheck::format_bytes(have));
    });
  } else {
    const uint64_t need = collcheck::verify_memory_needed(o.space, here_max, npeers);
    refuse_unless_fits(session, need, [&](uint64_t have) {
      // The largest of each flag that fits, the others as given.
      auto fits = [&](collcheck::CaseSpace s) {
        return collcheck::verify_memory_needed(s, session.ranks_here(s.max_ranks), npeers) <= have;
      };
      std::vector<std::string> alt;
      collcheck::CaseSpace s = o.space;
      while (s.large_bytes >= (size_t{64} << 10) && !fits(s)) s.large_bytes /= 2;
      if (fits(s) && s.large_bytes != o.space.large_bytes)
        alt.push_back(fmt::format("--large-bytes {}", s.large_bytes < (size_t{64} << 10) ? 0 : s.large_bytes));
      s = o.space;
      while (s.max_count > 1 && !fits(s)) s.max_count /= 2;
      if (fits(s) && s.max_count != o.space.max_count) alt.push_back(fmt::format("--max-count {}", s.max_count));
      s = o.space;
      if (!session.is_mpi()) {
        while (s.max_ranks > 1 && !fits(s)) --s.max_ranks;
        if (fits(s)) alt.push_back(fmt::format("--max-ranks {}", s.max_ranks));
      }
      return fmt::format("the largest case verify can draw ({} rank(s) in this process, up to {} elements, or {} "
                         "bytes in its large counts) needs about {} ((11 + {} peer(s)) x its buffer, per rank); {} "
                         "is available; what fits, each alone: {}",
                         here_max, o.space.max_count, o.space.large_bytes, collcheck::format_bytes(need), npeers,
                         collcheck::format_bytes(have), alt.empty() ? "nothing" : fmt::format("{}", fmt::join(alt, ", ")));
    });
  }
}

// The MPI world: rank 0 draws and judges the cases, every other rank serves.
int verify_in_mpi(VerifyFlags& f, const collcheck::Session& session, collcheck::VerifyOptions& o,
                  const collcheck::RunConfig& cfg) {
  collcheck::MpiWorld* mpi = session.mpi();
  o.launcher = session.launcher();
  o.run_flags += session.world_flag();
  o.world_desc = fmt::format("MPI world of {} processes ({})", session.processes(), collcheck::mpi_library_version());
  if (f.mpi_algo >= 0) o.run_flags += fmt::format(" --mpi-algo {}", f.mpi_algo);
  if (f.isolate == "on") throw UsageError("--isolate on is for the thread world; in the MPI world each rank is a process already");
  if (!session.root()) {
    const auto code = collcheck::serve_cases(*mpi, cfg, *f.report.events);
    if (!code) {
      std::fprintf(stderr, "collcheck: rank %d: ending the job\n", session.rank());
      session.abort(1);
    }
    return *code;
  }
  collcheck::WorldExecutor exec(*mpi, cfg);
  collcheck::VerifyResult result;
  try {
    result = collcheck::run_verify(o, exec, *f.report.events);
  } catch (const collcheck::WorldLost& lost) {
    // Which case: the last one the executor ran.
    collcheck::report_unshrunk_failure(o, exec.last_case(), lost.outcome.failure, *f.report.events);
    std::fflush(stdout);
    session.abort(1);
  }
  std::fflush(stdout);
  const bool metrics_ok = export_verify_metrics(f, result, session);
  const int code = finish_reports(f.report, collcheck::verify_report(o, result),
                                  output_lost_unless(metrics_ok, result.exit_code()));
  exec.stop(code);
  return code;
}
}  // namespace

int run_verify_command(VerifyFlags& f, const collcheck::Session& session) {
  collcheck::VerifyOptions o = verify_options(f, session);
  if (!f.replay.empty()) read_replay_tokens(f, o);
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
    o.token_dir = std::filesystem::absolute(f.report.requests.front().path).parent_path().string();
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
  // An implementation that follows the nodes is checked on every topology:
  // each case draws its nodes (and in the MPI world may keep the hosts').
  o.space.nodes = impl->follows_nodes();
  cfg.world_nodes = session.nodes();
  cfg.timeout = std::chrono::milliseconds(static_cast<long long>(f.timeout * 1000));
  const bool root = session.root();
  auto say = [&](const std::string& line) {
    if (root) fmt::print("{}\n", line);
  };

  Impls all{{"--impl", impl}};
  for (const auto& p : cfg.peers) all.emplace_back("--against", p);
  if (const auto skipped = admit_implementations(f, session, all, o, say)) return *skipped;
  restrict_to_what_runs(f, session, all, o, say);
  refuse_unless_verify_fits(session, o, cfg.peers.size());
  if (session.is_mpi()) return verify_in_mpi(f, session, o, cfg);
  const bool isolate = f.isolate == "on" || (f.isolate == "auto" && impl->untrusted());
  auto exec = collcheck::make_executor(cfg, isolate);
  const auto result = collcheck::run_verify(o, *exec, *f.report.events);
  std::fflush(stdout);
  const bool metrics_ok = export_verify_metrics(f, result, session);
  return finish_reports(f.report, collcheck::verify_report(o, result), output_lost_unless(metrics_ok, result.exit_code()));
}

}  // namespace collcheck::cli
