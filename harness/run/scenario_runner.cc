#include "harness/model/heap.h"
#include "harness/run/scenario_runner.h"

#include "harness/session/session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "faults/nemesis.h"
#include "harness/run/communicator.h"
#include "harness/world/crash_handler.h"
#include "harness/model/size.h"
#include "harness/model/data.h"
#include "harness/check/guard.h"
#include "harness/check/oracle.h"
#include "harness/model/atomic_file.h"

#include <nlohmann/json.hpp>

#include "harness/run/rank_program.h"

namespace collcheck {

namespace {

std::chrono::milliseconds millis(double s) {
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(s * 1000)));
}

}  // namespace

namespace {


bool stalls(const Scenario& s, int r) {
  for (const auto& st : s.program(r))
    if (st.kind == Step::Stall) return true;
  return false;
}

std::string temp_dir(const char* what, Clock::time_point epoch) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("collcheck-{}-{}-{}", what, ::getpid(), epoch.time_since_epoch().count()))
      .string();
}

// A rank's oracle verdict on its waited results, as the root reads it.
std::string verdict_text(RankResults& outs, const std::vector<FaultTally>& tallies) {
  outs.finish();
  const auto& wrong = outs.wrong();
  nlohmann::json faults = nlohmann::json::array();
  for (const auto& t : tallies) faults.push_back({t.seen, t.fired});
  return nlohmann::json{{"checked", outs.checked()},
                        {"wrong", wrong ? wrong->text : ""},
                        {"wrong_seq", wrong && wrong->seq ? *wrong->seq : 0},
                        {"wrong_group", wrong ? wrong->group : ""},
                        {"faults", faults},
                        {"hashes", outs.hashes()}}
      .dump();
}

}  // namespace

// The run's limit: every call may take its deadline twice (in guarded mode a
// rank may first wait a deadline for the others' fingerprints), plus the sleeps.
double replay_limit_s(const Scenario& s) {
  double longest = 0;
  for (int r = 0; r < s.ranks; ++r) {
    double t = 0;
    for (const auto& st : s.program(r)) t += st.kind == Step::Sleep ? st.sleep_ms / 1e3 : 2 * s.deadline_s;
    longest = std::max(longest, t);
  }
  return longest + 2 * s.deadline_s + 2;
}

ReplayResult replay_scenario(const Scenario& in, const ReplayOptions& o) {
  // Unguarded mode is production: a size mismatch is not an error at the
  // transfer but what NCCL makes of it, a hang until the deadline or wrong
  // data (the symptom says which). MPI checks sizes itself (MPI_ERR_TRUNCATE).
  const auto world = o.make_world({.ranks = in.ranks, .sizes_as_nccl = !o.guarded.value_or(in.guarded)});
  return replay_scenario(in, o, *world);
}

ReplayResult replay_in_session(const Scenario& s, const ReplayOptions& o, const Session& session) {
  if (auto* mpi = session.mpi()) return replay_scenario(s, o, *mpi);
  ReplayOptions here = o;
  here.make_world = session.worlds();
  if (session.sim_by_default()) {
    // The scenario's implementation may run as threads by default (a plugin).
    try {
      if (make_implementation(s.impl)->threads_by_default()) here.make_world = thread_worlds();
    } catch (const ImplementationError&) {
      // replay_scenario names the bad impl field.
    }
  }
  return replay_scenario(s, here);
}

ReplayResult replay_scenario(const Scenario& in, const ReplayOptions& o, World& world) {
  keep_buffers_in_the_heap();  // each call's buffers, freed and made again
  if (in.world == "mpi" && world.kind() != "mpi")
    throw ScenarioError(fmt::format("{}: world.kind: '{}' runs one rank per process: mpirun -np {} collcheck replay "
                                    "{} --world mpi",
                                    in.file, in.world, in.ranks, in.file));
  const Scenario s = apply_mutators(in);
  if (s.ranks != world.size())
    throw ScenarioError(world.kind() == "mpi"
                            ? fmt::format("{}: world.ranks is {}, but mpirun started {} processes; run it with -np {}",
                                          s.file, s.ranks, world.size(), s.ranks)
                            : fmt::format("{}: world.ranks is {}, but the thread world has {} ranks", s.file, s.ranks,
                                          world.size()));
  ImplPtr impl;
  try {
    impl = make_implementation(s.impl);
  } catch (const ImplementationError& e) {
    throw ScenarioError(fmt::format("{}: impl: {}", s.file, e.what()));
  }
  if (auto why = impl->unsupported_world(world.kind() == "mpi" ? WorldKind::Mpi : world.kind() == "sim" ? WorldKind::Sim : WorldKind::Threads))
    throw ScenarioError(fmt::format("{}: impl: {}", s.file, *why));
  if (auto why = impl->unavailable())
    throw ScenarioUnavailable(fmt::format("{}: impl: {} cannot run here: {}", s.file, s.impl, *why));
  ReplayResult res;
  res.guarded = o.guarded.value_or(s.guarded);
  const bool guarded = res.guarded;
  const int p = s.ranks;
  const Clock::time_point epoch = world.start();
  // The run's identity, in every dump: the root's random id, and what ran.
  std::random_device rd;
  const std::string chosen = fmt::format("{:08x}{:08x}", rd(), rd());
  const std::string run_id = world.broadcast(chosen, Clock::now() + std::chrono::seconds(60)).value_or(chosen);
  const std::string yaml = scenario_to_yaml(s);
  const std::string run_what = fmt::format("{:016x}", fnv1a(yaml.data(), yaml.size()));
  // A crash dumps every rank's recorder where the dumps would go anyway.
  set_crash_dump_dir(!o.dump_dir.empty() ? o.dump_dir : temp_dir("crash", epoch));
  set_crash_context(fmt::format("replaying {} ({})", s.file, s.name));
  const double limit_s = replay_limit_s(s);
  const auto timeout = millis(s.deadline_s);
  // What the rank bodies touch lives on the heap, owned by the bodies too: a
  // body that never returns (stuck inside the implementation) keeps it alive
  // after this function has returned.
  struct Shared {
    Scenario s;
    ImplPtr impl;
    std::unique_ptr<CallGuard> guard;  // the world's calls
    std::map<std::string, std::unique_ptr<CallGuard>> group_guards;  // each process group's
    std::vector<RankRecorders> recs;
    std::vector<RankResults> outs;
    std::vector<std::string> verdicts;
    std::vector<std::vector<FaultTally>> tallies;
  };
  auto sh = std::make_shared<Shared>();
  sh->s = s;
  sh->impl = impl;
  sh->guard = world.call_guard(epoch, timeout);
  // A process group's guard is shared memory between its ranks' threads.
  for (const auto& g : s.groups)
    sh->group_guards[g.name] = std::make_unique<FingerprintGuard>(static_cast<int>(g.ranks.size()), epoch, timeout);
  sh->recs.resize(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r)
    if (world.holds(r)) {
      sh->recs[static_cast<size_t>(r)] = make_recorders(s, r, epoch, world.fiber_host(), run_id, run_what);
      const World::ClockNote clock = world.clock_note();
      for (FlightRecorder* rec : sh->recs[static_cast<size_t>(r)].all()) rec->set_clock(clock.aligned, clock.uncertainty_s);
    }
  for (int r = 0; r < p; ++r) sh->outs.emplace_back(p, r, o.kept_output_bytes);
  sh->verdicts.resize(static_cast<size_t>(p));
  sh->tallies.resize(static_cast<size_t>(p));
  auto& recs = sh->recs;
  auto& verdicts = sh->verdicts;
  auto& guard = sh->guard;
  bool some_rank_stalls = false;
  for (int r = 0; r < p; ++r) some_rank_stalls |= stalls(s, r);

  const WorldRun run = world.run(
      [sh, p, timeout, guarded, epoch, limit_s, some_rank_stalls](RankContext& ctx) {
        const int r = ctx.rank();
        const auto ri = static_cast<size_t>(r);
        RankEnv env{sh->s, r, sh->impl, timeout, sh->recs[ri], sh->outs[ri], {}, {}, {}, sh->tallies[ri]};
        if (guarded) {
          env.before_call = [sh, r](const std::string& g, const CallFingerprint& fp) {
            (g.empty() ? *sh->guard : *sh->group_guards.at(g)).check(r, fp);
          };
          // A rank whose program ended: the guards name a call it will never
          // join once every other rank is in it (no deadline waited out).
          env.ended = [sh, r] {
            sh->guard->ended(r);
            for (const auto& g : sh->s.groups)
              if (std::find(g.ranks.begin(), g.ranks.end(), r) != g.ranks.end()) sh->group_guards.at(g.name)->ended(r);
          };
        }
        // Never enter the remaining calls: wait until the others give up or
        // end, or the run's limit.
        env.stall = [&ctx, epoch, limit_s] { ctx.wait_for_others(epoch + millis(limit_s - 1)); };
        const auto finish = [&] {
          sh->verdicts[ri] = verdict_text(sh->outs[ri], sh->tallies[ri]);
          if (some_rank_stalls && !stalls(sh->s, r)) ctx.announce_end();
        };
        try {
          run_rank_program(env, ctx.links());
        } catch (...) {
          finish();
          throw;
        }
        finish();
      },
      millis(limit_s));
  res.hung = run.hung;

  // Every rank's dump and verdict to the root, which judges.
  const std::string reason = run.hung ? "run limit" : (run.ok() ? "end of run" : "call failed or deadline");
  // A world that holds every rank (threads) hands the root its recorders'
  // dumps as they are; a world of processes sends them as JSON text.
  bool all_here = true;
  for (int r = 0; r < p; ++r) all_here = all_here && world.holds(r);
  std::vector<std::string> texts(static_cast<size_t>(p));
  if (!all_here)
    for (int r = 0; r < p; ++r)
      if (world.holds(r)) {
        // Every communicator's dump of the rank, in one text.
        nlohmann::json all = nlohmann::json::array();
        for (const FlightRecorder* rec : recs[static_cast<size_t>(r)].all()) all.push_back(rec->to_json(reason));
        texts[static_cast<size_t>(r)] = all.dump(1);
      }
  const Deadline gather_by = std::max(epoch + millis(limit_s + 5), Clock::now() + std::chrono::seconds(5));
  const auto dump_texts = all_here ? std::vector<std::optional<std::string>>(static_cast<size_t>(p))
                                   : world.gather(texts, gather_by);
  const auto verdict_texts = world.gather(verdicts, gather_by);
  res.seconds = std::chrono::duration<double>(world.now() - epoch).count();
  res.virtual_time = world.fiber_host() != nullptr;
  if (!world.root()) return res;  // rank 0 reports

  std::vector<RankDump> dumps;  // every communicator's, of every rank
  std::vector<size_t> to_file;  // the dumps worth a file, by index
  std::vector<nlohmann::json> checked;
  std::vector<int> checked_rank;
  for (int q = 0; q < p; ++q) {
    // A rank whose body never returned has a dump (what it recorded so far)
    // but no verdict; a rank whose process is gone has neither.
    const auto& d = dump_texts[static_cast<size_t>(q)];
    const auto& v = verdict_texts[static_cast<size_t>(q)];
    if ((!all_here && !d) || !v || v->empty()) res.hung = true;
    if (!all_here && !d) continue;
    std::vector<RankDump> mine;
    if (all_here) {
      for (const FlightRecorder* rec : recs[static_cast<size_t>(q)].all()) mine.push_back(rec->to_dump(reason));
    } else {
      for (const auto& one : nlohmann::json::parse(*d)) mine.push_back(rank_dump_from_json(one));
    }
    for (auto& one_dump : mine) {
      // Point-to-point calls the rank never made are not worth a file; a
      // group's collectives are, empty (a member that never joined shows).
      if (!one_dump.p2p || !one_dump.calls.empty() || one_dump.crash) to_file.push_back(dumps.size());
      dumps.push_back(std::move(one_dump));
    }
    checked.push_back(v && !v->empty() ? nlohmann::json::parse(*v)
                                        : nlohmann::json{{"checked", 0}, {"wrong", ""}, {"wrong_seq", 0}});
    checked_rank.push_back(q);
  }
  res.first_failure = first_failure(dumps);

  AnalysisOptions ao;
  ao.run_finished = run.ok() && !res.hung;
  // Unguarded mode is production: dumps on the deadline, and the diagnosis
  // from the files alone. Guarded mode writes them when asked to.
  // A dump that cannot be written (a full disk) loses the files, not the
  // verdict: the analysis reads the dumps in memory, and the run says which
  // files are missing (res.dump_error).
  bool dumps_on_disk = false;
  if (!guarded || !o.dump_dir.empty()) {
    res.dump_dir = !o.dump_dir.empty() ? o.dump_dir : temp_dir("dumps", epoch);
    try {
      std::filesystem::create_directories(res.dump_dir);
      for (const size_t i : to_file) {
        const RankDump& d = dumps[i];
        write_file_atomically((std::filesystem::path(res.dump_dir) / dump_file_name(d.rank, d.group, d.p2p)).string(),
                              rank_dump_to_json(d).dump(1));
      }
      dumps_on_disk = true;
    } catch (const std::exception& e) {
      res.dump_error = e.what();
    }
  }
  if (guarded) {
    res.diagnoses = analyze(dumps, ao);
    // The first guard to fire, of the world's and the groups'.
    std::optional<Diagnosis> v = guard->violation();
    double when = v ? guard->violation_time() : -1;
    for (const auto& [name, g] : sh->group_guards) {
      auto gv = g->violation();
      if (gv && (!v || g->violation_time() < when)) {
        v = gv;
        v->group = name;
        v->text = group_prefix(name) + v->text;
        when = g->violation_time();
      }
    }
    if (v) {
      // The guard's finding is the same classification, made before the call
      // from that call's fingerprints alone. The analysis saw more: the calls
      // each rank would have issued next, which tell an extra or a skipped
      // call from a reorder; its finding at that call wins then.
      // A missing rank named early: the analysis's finding at that call says
      // more (the last call each rank completed, how the program ended).
      // Ranks missing from several groups' calls: which guard fires first
      // depends on when the last of the others reached each call (a busy
      // host reorders them); the analysis orders those findings by blame
      // and by the call entered first, as analyze does, so its first one
      // for these ranks is taken, in whichever group: the first that names
      // any of them (the guard that fired first may have seen one of several
      // missing ranks; which one is the schedule's choice, not the bug's).
      const auto realigned = std::find_if(res.diagnoses.begin(), res.diagnoses.end(), [&](const Diagnosis& d) {
        if (v->kind == DiagnosisKind::MissingRank)
          return d.kind == DiagnosisKind::MissingRank && std::any_of(d.ranks.begin(), d.ranks.end(), [&](int r) {
                   return std::find(v->ranks.begin(), v->ranks.end(), r) != v->ranks.end();
                 });
        return (d.kind == DiagnosisKind::ExtraCall || d.kind == DiagnosisKind::SkippedCall) && d.group == v->group &&
               d.seq == v->seq;
      });
      if (realigned != res.diagnoses.end()) {
        Diagnosis first = *realigned;
        first.text += v->kind == DiagnosisKind::MissingRank
                          ? " (caught by guarded mode when the last of the other ranks reached the call, without "
                            "waiting out the deadline)"
                          : " (caught before the call by guarded mode)";
        res.diagnoses.erase(realigned);
        v = first;
      }
      std::erase_if(res.diagnoses, [&](const Diagnosis& d) { return d.kind == v->kind && d.group == v->group; });
      res.diagnoses.insert(res.diagnoses.begin(), *v);
      res.time_to_diagnosis = when;
    }
  } else {
    // Production's path: the diagnosis from the files alone, when they were written.
    if (dumps_on_disk) dumps = load_dumps(res.dump_dir);
    res.diagnoses = analyze(dumps, ao);
  }

  // Every waited result against the oracle (exact data: compared bit for bit),
  // each rank's counted; the first wrong one is a diagnosis unless the calls
  // disagreed or a payload was corrupted on purpose.
  const bool corrupted = has_diagnosis(res, {DiagnosisKind::CorruptedPayload});
  const bool mismatch = has_diagnosis(res, {DiagnosisKind::ShapeMismatch, DiagnosisKind::OrderMismatch,
                                            DiagnosisKind::ExtraCall, DiagnosisKind::SkippedCall});
  for (const auto& v : checked) res.results_checked += v.at("checked").get<size_t>();
  // A link fault that changed nothing: said, so the run does not read like a missed diagnosis.
  std::vector<FaultTally> total(s.faults.size());
  for (const auto& v : checked) {
    const auto& f = v.contains("faults") ? v["faults"] : nlohmann::json::array();
    for (size_t i = 0; i < f.size() && i < total.size(); ++i) {
      total[i].seen += f[i].at(0).get<uint64_t>();
      total[i].fired += f[i].at(1).get<uint64_t>();
    }
  }
  res.unfired = unfired_faults(s, total);
  bool wrong = false;
  for (size_t i = 0; i < checked.size() && !mismatch && !corrupted; ++i) {
    const std::string text = checked[i].at("wrong").get<std::string>();
    if (text.empty()) continue;
    Diagnosis d;
    d.kind = DiagnosisKind::WrongResult;
    d.ranks = {checked_rank[i]};
    d.seq = checked[i].at("wrong_seq").get<uint64_t>();
    d.group = checked[i].value("wrong_group", "");
    d.text = group_prefix(d.group) + text;
    res.diagnoses.push_back(d);
    wrong = true;
    break;
  }
  // Each rank checked its share of every result; the shares cover the whole
  // only if every rank holds the same bits. At the first call where they do
  // not, the ranks outside the largest group of equal results are named.
  if (!wrong && !mismatch && !corrupted && !checked.empty()) {
    // (group, seq) -> hash -> ranks
    std::map<std::pair<std::string, uint64_t>, std::map<uint64_t, std::vector<int>>> by_seq;
    for (size_t i = 0; i < checked.size(); ++i)
      for (const auto& h : checked[i].value("hashes", nlohmann::json::array()))
        by_seq[{h.at(0).get<std::string>(), h.at(1).get<uint64_t>()}][h.at(2).get<uint64_t>()].push_back(
            checked_rank[i]);
    for (const auto& [key, groups] : by_seq) {
      const auto& [group, seq] = key;
      if (groups.size() < 2) continue;
      auto largest = groups.begin();
      for (auto it = groups.begin(); it != groups.end(); ++it)
        if (it->second.size() > largest->second.size()) largest = it;
      Diagnosis d;
      d.kind = DiagnosisKind::WrongResult;
      d.seq = seq;
      // No strict majority: every rank is named.
      size_t ties = 0;
      for (const auto& [hash, ranks] : groups) ties += ranks.size() == largest->second.size() ? 1 : 0;
      std::string held;
      for (const auto& [hash, ranks] : groups) {
        held += fmt::format("{}{} one result", held.empty() ? "" : "; ", ranks_text(ranks));
        if (ties > 1 || &ranks != &largest->second) d.ranks.insert(d.ranks.end(), ranks.begin(), ranks.end());
      }
      std::sort(d.ranks.begin(), d.ranks.end());
      d.group = group;
      const CallRecord* rec = nullptr;
      for (const auto& dump : dumps)
        if (dump.group == group && !dump.p2p)
          for (const auto& cr : dump.calls)
            if (cr.seq == seq) rec = &cr;
      d.text = fmt::format("{}call #{} ({}): the ranks hold different results ({}); each rank's share of the {} "
                           "elements matched the oracle, so a result is wrong outside its rank's share",
                           group_prefix(group), seq, rec ? rec->tag : "?", held,
                           rec ? rec->count : 0);
      res.diagnoses.push_back(d);
      break;
    }
  }
  if (!guarded) {
    res.symptom = symptom_of(dumps, checked, checked_rank, res.hung, s.deadline_s);
    if (res.symptom.empty() && !res.diagnoses.empty())
      res.symptom = "nothing: every call returned and every result the oracle checked was right (a silent bug)";
  }
  if (res.diagnoses.empty() && !run.ok()) res.unexplained = run.failures();
  if (!res.diagnoses.empty() && res.time_to_diagnosis < 0)
    res.time_to_diagnosis = std::chrono::duration<double>(world.now() - epoch).count();
  res.dumps = std::move(dumps);
  return res;
}

}  // namespace collcheck
