// verify's planning and run (the command line hands it the flags as a VerifyJob).
#include "properties/verify_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "harness/model/size.h"
#include "harness/peers/mpi_impl.h"
#include "harness/peers/peer_registry.h"
#include "properties/executor.h"

namespace collcheck {

namespace {
using Say = std::function<void(const std::string&)>;
using Impls = std::vector<std::pair<std::string, ImplPtr>>;

// Every implementation must run in this world and on this machine (a GPU
// library needs its GPUs; without them the run is skipped, exit 77, never a
// pass), and fit the ranks asked for. nullopt: admitted.
std::optional<int> admit_implementations(const VerifyJob& job, const Session& session, WorldKind kind,
                                         const Impls& all, VerifyOptions& o, const Say& say) {
  for (const auto& [flag, x] : all)
    if (auto why = x->no_fork(); why && job.isolate == "on")
      throw UsageError(fmt::format("--isolate on cannot be used with {}: {}", x->name(), *why));
  for (const auto& [flag, x] : all) {
    if (auto why = x->unavailable()) {
      say(fmt::format("collcheck verify: SKIPPED (not a pass): {} {} cannot run here: {}", flag, x->name(), *why));
      return kExitSkipped;
    }
  }
  for (const auto& [flag, x] : all) {
    if (auto why = x->unsupported_world(kind)) throw UsageError(fmt::format("{} {}: {}", flag, x->name(), *why));
    try {
      x->fit_world(session.mpi(), o.space.max_ranks, say);
    } catch (const ImplementationError& e) {
      throw UsageError(e.what());
    }
  }
  return std::nullopt;
}

// The per-peer limits (Gloo's p <= 8, --mpi-algo's peer), then the dtype/op
// pairs every implementation can reduce, and the replay's case against them.
void restrict_to_what_runs(const VerifyJob& job, const Session& session, const Impls& all,
                           VerifyOptions& o, const Say& say) {
  // Gloo's float16 sums and products are checked against Gloo's own (buggy)
  // step over every order (finding gloo-f16-assign), which is exact only up to
  // p = 8: by default Gloo worlds stay there.
  bool uses_gloo = false;
  for (const auto& [flag, x] : all) uses_gloo |= x->name().rfind("gloo:", 0) == 0;
  if (uses_gloo && !job.max_ranks_given && o.space.max_ranks > 8) {
    say("note: gloo: p <= 8 by default, where its float16 finding (gloo-f16-assign) is checked exactly over every "
        "reduction order; --max-ranks goes higher, and a float16 sum or product hit above p = 8 is then reported");
    o.space.max_ranks = 8;
  }
  if (job.mpi_algo >= 0) {
    bool uses_mpi = false;
    for (const auto& [flag, x] : all) uses_mpi |= x->name() == "mpi";
    if (!uses_mpi) throw UsageError("--mpi-algo applies to MPI_Allreduce: use it with --impl mpi or --against mpi");
    say(fmt::format("MPI_Allreduce algorithm asked for: {} ({}) via coll_tuned_use_dynamic_rules=1 "
                    "coll_tuned_allreduce_algorithm={}",
                    job.mpi_algo, kMpiAllreduceAlgos[job.mpi_algo], job.mpi_algo));
  }

  // Draw only what every implementation can reduce; say what is left out, and why.
  std::vector<ImplPtr> impls;
  for (const auto& [flag, x] : all) impls.push_back(x);
  const auto skipped = restrict_space(o.space, impls);
  for (const auto& [why, pairs] : skipped)
    say(fmt::format("skipped {} dtype/op pair(s), {}: {}", pairs.size(), why, fmt::join(pairs, " ")));
  if (o.space.dtypes.empty() || o.space.ops.empty())
    throw UsageError("nothing left to verify: every dtype/op pair asked for is unsupported (see the lines above)");
  if (o.replay) {
    std::vector<const Case*> every{&*o.replay};
    for (const auto& b : o.replay_before) every.push_back(&b);
    for (const Case* c : every) {
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
void refuse_unless_verify_fits(const Session& session, const VerifyOptions& o, size_t npeers) {
  const int here_max = session.ranks_here(o.space.max_ranks);
  if (o.replay) {
    const uint64_t need = case_memory_needed(*o.replay, session.ranks_here(o.replay->p), npeers);
    refuse_unless_fits(session, need, [&](uint64_t have) {
      return fmt::format("--replay: the case needs about {} in this process ((11 + {} peer(s)) x its buffer, per "
                         "rank); {} is available",
                         format_bytes(need), npeers, format_bytes(have));
    });
  } else {
    const uint64_t need = verify_memory_needed(o.space, here_max, npeers);
    refuse_unless_fits(session, need, [&](uint64_t have) {
      // The largest of each flag that fits, the others as given.
      auto fits = [&](CaseSpace s) {
        return verify_memory_needed(s, session.ranks_here(s.max_ranks), npeers) <= have;
      };
      std::vector<std::string> alt;
      CaseSpace s = o.space;
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
                         here_max, o.space.max_count, o.space.large_bytes, format_bytes(need), npeers,
                         format_bytes(have), alt.empty() ? "nothing" : fmt::format("{}", fmt::join(alt, ", ")));
    });
  }
}

// How many cases run side by side (--jobs): in the simulated world, where a
// case's outcome is its own whatever ran beside it, for implementations whose
// cases share no state (not a plugin, not a library; not isolated). Asked for
// elsewhere, it is refused; by default one per core (at most 8), and no more
// than the memory holds of the largest case.
int side_by_side(const VerifyJob& job, WorldKind kind, bool isolate, const Impls& all, uint64_t need) {
  std::string why_not;
  if (kind != WorldKind::Sim) why_not = "this run's world is not the simulated one";
  if (isolate) why_not = "this run isolates its cases in a child process";
  for (const auto& [flag, impl] : all)
    if (why_not.empty() && impl->state_across_cases())
      why_not = fmt::format("{} {} may keep state across cases", flag, impl->name());
  if (!why_not.empty()) {
    if (job.jobs > 1) throw UsageError(fmt::format("--jobs {}: cases run side by side only in the simulated world, for "
                                                   "the reference algorithms, and {}", job.jobs, why_not));
    return 1;
  }
  if (job.jobs > 0) return job.jobs;
  int n = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  if (const auto have = memory_available(); have && need > 0)
    n = static_cast<int>(std::clamp<uint64_t>(*have / need, 1, static_cast<uint64_t>(n)));
  return n;
}

// The run's end on the root: the run as one unit event (what the metrics
// sink counts), then the command's `finish` (its reports).
int finish_run(const VerifyOptions& o, const VerifyResult& r, Events& ev, const VerifyFinish& finish) {
  const bool ok = !r.failed && !r.harness_error;
  nlohmann::json u{{"type", "unit"}, {"workload", "verify"}, {"impl", o.impl_spec}, {"cases", r.cases_run},
                   {"ok", ok}, {"seed", fmt::format("{:#x}", o.seed)}};
  if (!ok) u["property"] = r.harness_error ? "harness" : r.failure.property;
  ev.emit(UnitEvent{u});
  return finish(o, r);
}

// The MPI world: rank 0 draws and judges the cases, every other rank serves.
int verify_in_mpi(VerifyJob& job, const Session& session, const RunConfig& cfg, Events& ev, const VerifyFinish& finish) {
  VerifyOptions& o = job.o;
  MpiWorld* mpi = session.mpi();
  o.launcher = session.launcher();
  o.run_flags += session.world_flag();
  o.world_desc = fmt::format("MPI world of {} processes ({})", session.processes(), mpi_library_version());
  if (job.mpi_algo >= 0) o.run_flags += fmt::format(" --mpi-algo {}", job.mpi_algo);
  if (job.isolate == "on") throw UsageError("--isolate on is for the thread world; in the MPI world each rank is a process already");
  if (!session.root()) {
    const auto code = serve_cases(*mpi, cfg, ev);
    if (!code) {
      ev.warn("collcheck: rank {}: ending the job\n", session.rank());
      session.abort(1);
    }
    return *code;
  }
  WorldExecutor exec(*mpi, cfg);
  VerifyResult result;
  try {
    result = run_verify(o, exec, ev);
  } catch (const WorldLost& lost) {
    // Which case: the last one the executor ran.
    report_unshrunk_failure(o, exec.last_case(), lost.outcome.failure, ev);
    session.abort(1);
  }
  const int code = finish_run(o, result, ev, finish);
  exec.stop(code);
  return code;
}

// The implementation and its peers, made from their specs.
RunConfig make_config(const VerifyJob& job, const Session& session) {
  RunConfig cfg;
  try {
    cfg.impl = make_implementation(job.impl);
  } catch (const ImplementationError& e) {
    throw UsageError(fmt::format("--impl: {}", e.what()));
  }
  try {
    cfg.peers = job.against.empty() ? default_peers(*cfg.impl) : make_implementations(job.against);
  } catch (const ImplementationError& e) {
    throw UsageError(fmt::format("--against: {}", e.what()));
  }
  cfg.world_nodes = session.nodes();
  cfg.make_world = session.worlds();
  cfg.schedules = job.schedules;
  cfg.timeout = std::chrono::milliseconds(static_cast<long long>(job.timeout_s * 1000));
  return cfg;
}
}  // namespace

int run_verify_job(VerifyJob& job, const Session& session, Events& ev, const VerifyFinish& finish) {
  if (!job.planned) plan_verify(job, session);
  VerifyOptions& o = job.o;
  RunConfig cfg = make_config(job, session);
  // No --world: the simulated world, unless an implementation runs as
  // threads by default (a plugin, a library with threads of its own).
  WorldKind kind = session.kind();
  if (session.sim_by_default()) {
    bool threads = static_cast<bool>(cfg.impl->threads_by_default());
    for (const auto& p : cfg.peers) threads |= static_cast<bool>(p->threads_by_default());
    if (threads) {
      kind = WorldKind::Threads;
      cfg.make_world = thread_worlds();
      // Where it is the plugin that keeps the run on threads, say how to
      // leave them: fibers run several times as fast, and the same each time.
      if (cfg.impl->untrusted() && cfg.impl->threads_by_default())
        o.world_desc = "ranks as threads (the plugin does not declare collcheck_plugin_fiber_safe)";
    }
  }
  o.against = job.against;
  // An implementation that follows the nodes is checked on every topology:
  // each case draws its nodes (and in the MPI world may keep the hosts').
  o.space.nodes = cfg.impl->follows_nodes();
  const Say say = [&](const std::string& line) {
    if (session.root()) ev.print("{}\n", line);
  };
  Impls all{{"--impl", cfg.impl}};
  for (const auto& p : cfg.peers) all.emplace_back("--against", p);
  if (const auto skipped = admit_implementations(job, session, kind, all, o, say)) return *skipped;
  restrict_to_what_runs(job, session, all, o, say);
  refuse_unless_verify_fits(session, o, cfg.peers.size());
  if (session.is_mpi()) return verify_in_mpi(job, session, cfg, ev, finish);
  o.run_flags += session.world_flag();
  if (kind == WorldKind::Sim) o.world_desc = "ranks as fibers in virtual time";
  if (kind == WorldKind::Sim && session.sim_by_default() && cfg.impl->untrusted())
    cfg.hang_hint = "(its ranks ran as fibers of one thread, as its collcheck_plugin_fiber_safe() declares they may: "
                    "a lock, barrier or condition variable of its own between ranks, or a loop that never calls a "
                    "link, blocks that thread; --world threads runs it as threads)";
  if (job.schedules > 1 && kind != WorldKind::Sim)
    throw UsageError("--schedules: runs each case under several schedules of the simulated world, and this run's "
                     "world is threads (name --world sim, or drop --schedules)");
  if (job.schedules > 1) {
    o.run_flags += fmt::format(" --schedules {}", job.schedules);
    o.world_desc += fmt::format(", {} schedules a case", job.schedules);
  }
  const bool isolate = job.isolate == "on" || (job.isolate == "auto" && cfg.impl->untrusted());
  cfg.parallel = side_by_side(job, kind, isolate, all, verify_memory_needed(o.space, o.space.max_ranks, cfg.peers.size()));
  auto exec = make_executor(cfg, isolate);
  return finish_run(o, run_verify(o, *exec, ev), ev, finish);
}

}  // namespace collcheck
