#include "harness/scenario_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "faults/nemesis.h"
#include "harness/communicator.h"
#include "harness/crash_handler.h"
#include "harness/data.h"
#include "harness/guard.h"
#include "harness/oracle.h"
#include "harness/thread_world.h"
#include "harness/atomic_file.h"
#include "harness/mpi_world.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

namespace collcheck {

namespace {

struct CallOut {
  CallStep call;
  uint64_t seq = 0;
  uint64_t seed = 0;
  std::vector<std::byte> out;
  bool waited = false;
};

uint64_t call_seed(int index, const std::string& tag) {
  uint64_t h = splitmix64(static_cast<uint64_t>(index) + 1);
  for (char ch : tag) h = splitmix64(h ^ static_cast<unsigned char>(ch));
  return h;
}

std::chrono::milliseconds millis(double s) {
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(s * 1000)));
}

}  // namespace

// When the first call failed on any rank (seconds from the start; -1: none).
double first_failure(const std::vector<RankDump>& dumps) {
  double t = -1;
  for (const auto& d : dumps)
    for (const auto& c : d.calls)
      if (c.state == CallState::Failed && (t < 0 || c.t_completed < t)) t = c.t_completed;
  return t;
}

bool has_diagnosis(const ReplayResult& r, std::initializer_list<DiagnosisKind> kinds) {
  for (const auto& d : r.diagnoses)
    for (DiagnosisKind k : kinds)
      if (d.kind == k) return true;
  return false;
}

// Every waited result of rank r against the oracle (exact data: compared bit
// for bit); the first wrong one as a diagnosis.
std::optional<Diagnosis> check_outs(int p, int r, const std::vector<CallOut>& outs, size_t& checked) {
  for (const CallOut& c : outs) {
    if (!c.waited) continue;
    std::vector<std::vector<std::byte>> ins(static_cast<size_t>(p));
    std::vector<const void*> ptrs;
    for (int q = 0; q < p; ++q) {
      ins[static_cast<size_t>(q)].resize(c.out.size());
      fill_input(ins[static_cast<size_t>(q)].data(), c.call.count, c.call.dtype, c.call.op, p, q, c.seed,
                 DataClass::Exact);
      ptrs.push_back(ins[static_cast<size_t>(q)].data());
    }
    const CheckSummary cs =
        check_all_reduce(resolve_reduction(c.call.dtype, c.call.op, p, c.call.scalar), ptrs, c.out.data(), c.call.count);
    ++checked;
    if (cs.wrong > 0) {
      Diagnosis d;
      d.kind = DiagnosisKind::WrongResult;
      d.ranks = {r};
      d.seq = c.seq;
      d.text = fmt::format("call #{} ({}) on rank {}: {} of {} elements wrong; {}", c.seq, c.call.tag, r, cs.wrong,
                           cs.checked, cs.first_wrong_detail);
      return d;
    }
  }
  return std::nullopt;
}

// What one rank's program needs from the world it runs in.
struct RankEnv {
  const Scenario& s;
  int rank;
  int p;
  ImplPtr impl;
  std::chrono::milliseconds timeout;
  FlightRecorder& rec;
  std::vector<CallOut>& outs;
  std::function<void(const CallFingerprint&)> before_call;  // guarded mode, or empty
  std::function<void()> stall;  // a stalled rank: wait, never entering the remaining calls
};

// One rank's program over `base` (the world's links): faults applied, every
// call recorded, every waited output kept for the oracle.
void run_rank_program(RankEnv& env, Links& base) {
  const int r = env.rank;
  const int p = env.p;
  const Scenario& s = env.s;
  FlightRecorder& rec = env.rec;
  std::vector<std::unique_ptr<Links>> keep;
  Links& faulty = wrap_links(s, r, base, keep);
  auto links = recording_links(faulty, rec);
  CommOptions co(s.impl, env.timeout, env.impl);
  co.recorder = &rec;
  co.poison_async = true;
  co.before_call = env.before_call;
  Communicator comm(*links, co);
  struct Pending {
    std::unique_ptr<Work> work;
    WaitAt at;
    size_t index;
  };
  std::vector<Pending> pending;
  std::vector<std::vector<std::byte>> inputs_alive;
  auto& mine = env.outs;
  auto wait_for = [&](WaitAt at) {
    for (auto& pw : pending) {
      if (pw.work && pw.at == at) {
        pw.work->wait();
        mine[pw.index].waited = true;
        pw.work.reset();
      }
    }
  };
  int index = 0;
  for (const Step& st : s.program(r)) {
    if (st.kind == Step::Sleep) {
      std::this_thread::sleep_for(std::chrono::duration<double>(st.sleep_ms / 1e3));
      continue;
    }
    if (st.kind == Step::Stall) {
      // Never enter the remaining calls: wait until the others give up
      // (their failure aborts this barrier) or the run's limit.
      env.stall();
      return;
    }
    wait_for(WaitAt::Next);
    const CallStep& c = st.call;
    CallOut co_out;
    co_out.call = c;
    co_out.seed = call_seed(index, c.tag);
    co_out.seq = comm.calls_issued() + 1;
    std::vector<std::byte> input(c.count * dtype_size(c.dtype));
    fill_input(input.data(), c.count, c.dtype, c.op, p, r, co_out.seed, DataClass::Exact);
    co_out.out.resize(input.size());
    mine.push_back(std::move(co_out));
    CallOut& out = mine.back();
    if (c.async) {
      auto w = comm.all_reduce_async(input.data(), out.out.data(), c.count, c.dtype, c.op, c.scalar, c.tag);
      if (c.read_before_wait) {
        rec.read_output(out.seq);
        std::vector<std::byte> seen(out.out);  // the program reads its output here
        (void)seen;
      }
      // The input must outlive the async call: keep it with the Work.
      pending.push_back({std::move(w), c.wait, mine.size() - 1});
      inputs_alive.push_back(std::move(input));
    } else {
      comm.all_reduce(input.data(), out.out.data(), c.count, c.dtype, c.op, c.scalar, c.tag);
      out.waited = true;
    }
    ++index;
  }
  wait_for(WaitAt::Next);
  wait_for(WaitAt::End);
  // WaitAt::Never: the Work is dropped here without wait(); the
  // communicator logs it and the recorder shows it completed, not waited.

}

ReplayResult replay_scenario(const Scenario& in, const ReplayOptions& o) {
  if (in.world != "threads")
    throw ScenarioError(fmt::format("{}: world.kind: '{}' runs one rank per process: mpirun -np {} collcheck replay "
                                    "{} --world mpi",
                                    in.file, in.world, in.ranks, in.file));
  const Scenario s = apply_mutators(in);
  ImplPtr impl;
  try {
    impl = make_implementation(s.impl);
  } catch (const ImplementationError& e) {
    throw ScenarioError(fmt::format("{}: impl: {}", s.file, e.what()));
  }
  ReplayResult res;
  res.guarded = o.guarded.value_or(s.guarded);
  const int p = s.ranks;
  const Clock::time_point epoch = Clock::now();
  // A crash dumps every rank's recorder where the dumps would go anyway.
  const std::string crash_dir =
      !o.dump_dir.empty() ? o.dump_dir
                          : (std::filesystem::temp_directory_path() /
                             fmt::format("collcheck-crash-{}-{}", ::getpid(), epoch.time_since_epoch().count()))
                                .string();
  set_crash_dump_dir(crash_dir);
  set_crash_context(fmt::format("replaying {} ({})", s.file, s.name));
  FingerprintGuard guard(p, epoch, millis(s.deadline_s));
  std::vector<std::unique_ptr<FlightRecorder>> recs;
  for (int r = 0; r < p; ++r) recs.push_back(std::make_unique<FlightRecorder>(r, p, epoch));
  std::vector<std::vector<CallOut>> outs(static_cast<size_t>(p));

  // The run's limit: every call may take its deadline, plus the sleeps.
  double longest = 0;
  for (int r = 0; r < p; ++r) {
    double t = 0;
    for (const auto& st : s.program(r)) t += st.kind == Step::Sleep ? st.sleep_ms / 1e3 : s.deadline_s;
    longest = std::max(longest, t);
  }
  const double limit_s = longest + 2 * s.deadline_s + 2;
  const auto timeout = millis(s.deadline_s);
  const bool guarded = res.guarded;

  ThreadWorld world(p);
  const WorldRun run = world.run(
      [&](RankContext& ctx) {
        const int r = ctx.rank();
        RankEnv env{s, r, p, impl, timeout, *recs[static_cast<size_t>(r)], outs[static_cast<size_t>(r)], {}, {}};
        if (guarded) env.before_call = [&guard, r](const CallFingerprint& fp) { guard.check(r, fp); };
        env.stall = [&] {
          // Wait until the others give up (their failure aborts this barrier)
          // or the run's limit.
          try {
            ctx.barrier(epoch + millis(limit_s - 1));
          } catch (const std::exception&) {
          }
        };
        run_rank_program(env, ctx.links());
      },
      millis(limit_s));
  res.hung = run.hung;
  res.seconds = std::chrono::duration<double>(Clock::now() - epoch).count();

  const std::string reason = run.hung ? "run limit" : (run.ok() ? "end of run" : "call failed or deadline");
  std::vector<RankDump> dumps;
  for (const auto& rec : recs) dumps.push_back(rank_dump_from_json(rec->to_json(reason)));
  res.first_failure = first_failure(dumps);

  AnalysisOptions ao;
  ao.run_finished = run.ok();
  if (guarded) {
    res.diagnoses = analyze(dumps, ao);
    if (auto v = guard.violation()) {
      // The guard's finding is the same classification, made before the call.
      std::erase_if(res.diagnoses, [&](const Diagnosis& d) { return d.kind == v->kind; });
      res.diagnoses.insert(res.diagnoses.begin(), *v);
      res.time_to_diagnosis = guard.violation_time();
    }
    if (!o.dump_dir.empty()) {  // dumps on request
      res.dump_dir = o.dump_dir;
      std::filesystem::create_directories(res.dump_dir);
      for (const auto& rec : recs) rec->dump(res.dump_dir, reason);
    }
  } else {
    // Production: dumps on the deadline, and the diagnosis from the files alone.
    res.dump_dir = o.dump_dir;
    if (res.dump_dir.empty()) {
      res.dump_dir = (std::filesystem::temp_directory_path() /
                      fmt::format("collcheck-dumps-{}-{}", ::getpid(), epoch.time_since_epoch().count()))
                         .string();
    }
    std::filesystem::create_directories(res.dump_dir);
    for (const auto& rec : recs) rec->dump(res.dump_dir, reason);
    dumps = load_dumps(res.dump_dir);
    res.diagnoses = analyze(dumps, ao);
  }
  if (!res.diagnoses.empty() && res.time_to_diagnosis < 0)
    res.time_to_diagnosis = std::chrono::duration<double>(Clock::now() - epoch).count();

  // Every waited result against the oracle (exact data: compared bit for bit).
  const bool corrupted = has_diagnosis(res, {DiagnosisKind::CorruptedPayload});
  const bool mismatch = has_diagnosis(res, {DiagnosisKind::ShapeMismatch, DiagnosisKind::OrderMismatch});
  if (!mismatch) {
    for (int r = 0; r < p; ++r) {
      auto wrong = check_outs(p, r, outs[static_cast<size_t>(r)], res.results_checked);
      if (wrong && !corrupted) {
        res.diagnoses.push_back(*wrong);
        break;
      }
    }
  }
  res.dumps = std::move(dumps);
  return res;
}

// ---- the MPI world: one rank per process ----

namespace {


std::string fingerprint_to_json(const CallFingerprint& f) {
  return nlohmann::json{{"seq", f.seq},   {"tag", f.tag},         {"count", f.count}, {"dtype", static_cast<int>(f.dtype)},
                        {"op", static_cast<int>(f.op)}, {"algorithm", f.algorithm}, {"async", f.async}}
      .dump();
}

CallFingerprint fingerprint_from_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  CallFingerprint f;
  f.seq = j.at("seq").get<uint64_t>();
  f.tag = j.at("tag").get<std::string>();
  f.count = j.at("count").get<size_t>();
  f.dtype = static_cast<DType>(j.at("dtype").get<int>());
  f.op = static_cast<RedOp>(j.at("op").get<int>());
  f.algorithm = j.at("algorithm").get<std::string>();
  f.async = j.at("async").get<bool>();
  return f;
}

// Guarded mode in the MPI world: before each call every rank sends its
// fingerprint to every other rank (a small extra exchange on a communicator
// of its own) and posts all of them into a local FingerprintGuard, so every
// rank reaches the same classification. A rank that never posts (stalled) is
// waited for until the call's deadline; the call then times out as in
// unguarded mode.
class MpiGuardExchange {
 public:
  MpiGuardExchange(int p, Clock::time_point epoch, std::chrono::milliseconds deadline)
      : p_(p), deadline_(deadline), guard_(p, epoch, std::chrono::milliseconds(0)) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    void* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    if (flag && ub) tag_ub_ = *static_cast<int*>(ub);
  }
  ~MpiGuardExchange() { MPI_Comm_free(&comm_); }
  MpiGuardExchange(const MpiGuardExchange&) = delete;
  MpiGuardExchange& operator=(const MpiGuardExchange&) = delete;

  void check(int rank, const CallFingerprint& fp) {
    const Deadline until = Clock::now() + deadline_;
    const std::string mine = fingerprint_to_json(fp);
    const int tag = static_cast<int>(fp.seq % (static_cast<uint64_t>(tag_ub_) + 1));
    std::vector<MPI_Request> sends;
    for (int q = 0; q < p_; ++q) {
      if (q == rank) continue;
      sends.emplace_back();
      MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, q, tag, comm_, &sends.back());
    }
    std::vector<bool> got(static_cast<size_t>(p_), false);
    got[static_cast<size_t>(rank)] = true;
    int missing = p_ - 1;
    while (missing > 0 && Clock::now() < until) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, &st);
      if (!flag) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      int n = 0;
      MPI_Get_count(&st, MPI_CHAR, &n);
      std::string text(static_cast<size_t>(n), '\0');
      MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, tag, comm_, MPI_STATUS_IGNORE);
      if (!got[static_cast<size_t>(st.MPI_SOURCE)]) {
        got[static_cast<size_t>(st.MPI_SOURCE)] = true;
        --missing;
      }
      try {
        guard_.check(st.MPI_SOURCE, fingerprint_from_json(text));
      } catch (const GuardViolation&) {  // judged below, once this rank's own fingerprint is in
      }
    }
    for (auto& r : sends) {  // small messages go eagerly; a peer that never reads them cannot hold us
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (!done) MPI_Request_free(&r);
    }
    guard_.check(rank, fp);  // throws GuardViolation naming the mismatch, the same on every rank
  }
  std::optional<Diagnosis> violation() const { return guard_.violation(); }
  double violation_time() const { return guard_.violation_time(); }

 private:
  int p_;
  std::chrono::milliseconds deadline_;
  FingerprintGuard guard_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int tag_ub_ = 32767;
};

}  // namespace

ReplayResult replay_scenario_mpi(const Scenario& in, const ReplayOptions& o, MpiWorld& world) {
  const Scenario s = apply_mutators(in);
  if (s.ranks != world.size())
    throw ScenarioError(fmt::format("{}: world.ranks is {}, but mpirun started {} processes; run it with -np {}",
                                    s.file, s.ranks, world.size(), s.ranks));
  ImplPtr impl;
  try {
    impl = make_implementation(s.impl);
  } catch (const ImplementationError& e) {
    throw ScenarioError(fmt::format("{}: impl: {}", s.file, e.what()));
  }
  if (auto why = impl->unsupported_world(WorldKind::Mpi)) throw ScenarioError(fmt::format("{}: impl: {}", s.file, *why));
  ReplayResult res;
  res.guarded = o.guarded.value_or(s.guarded);
  const int p = s.ranks, r = world.rank();
  // All ranks are alive at the start: a plain barrier gives them one time origin.
  MPI_Barrier(world.control());
  const Clock::time_point epoch = Clock::now();
  set_crash_dump_dir(!o.dump_dir.empty() ? o.dump_dir
                                         : (std::filesystem::temp_directory_path() /
                                            fmt::format("collcheck-crash-{}-rank{}", ::getpid(), r))
                                               .string());
  set_crash_context(fmt::format("replaying {} ({})", s.file, s.name));
  double longest = 0;
  for (int q = 0; q < p; ++q) {
    double t = 0;
    for (const auto& st : s.program(q)) t += st.kind == Step::Sleep ? st.sleep_ms / 1e3 : 2 * s.deadline_s;
    longest = std::max(longest, t);
  }
  const double limit_s = longest + 2 * s.deadline_s + 2;
  const auto timeout = millis(s.deadline_s);
  MpiGuardExchange guard(p, epoch, timeout);
  FlightRecorder rec(r, p, epoch);
  std::vector<CallOut> outs;
  RankEnv env{s, r, p, impl, timeout, rec, outs, {}, {}};
  if (res.guarded) env.before_call = [&guard, r](const CallFingerprint& fp) { guard.check(r, fp); };
  // Runs are numbered alike on every rank; the number keeps one run's messages
  // (and transfers) apart from the next one's.
  static uint64_t run_number = 0;
  ++run_number;
  const int over_tag = control_tag::kReplayOverBase + static_cast<int>(run_number % 1000);
  env.stall = [&] {
    // Never enter the remaining calls: wait until another rank's program has
    // ended (they give up on this one at their deadline), or the run's limit.
    (void)world.recv(MPI_ANY_SOURCE, over_tag, epoch + millis(limit_s - 1));
  };
  MpiLinks& links = world.links(p);
  links.set_epoch(run_number);
  bool ok = true, stalled = false;
  for (const auto& st : s.program(r)) stalled |= st.kind == Step::Stall;
  try {
    run_rank_program(env, links);
  } catch (const std::exception& e) {
    ok = false;
  }
  if (!stalled) {
    // Tell a stalled rank, if there is one, that the others are done. Small
    // messages go eagerly; nobody waits for these to be read.
    for (int q = 0; q < p; ++q) {
      if (q == r) continue;
      MPI_Request req;
      MPI_Isend("x", 1, MPI_CHAR, q, over_tag, world.control(), &req);
      MPI_Request_free(&req);
    }
  }

  // Rank 0 gathers every rank's dump and oracle verdict (every wait bounded).
  const std::string reason = ok ? "end of run" : "call failed or deadline";
  size_t checked = 0;
  auto wrong = check_outs(p, r, outs, checked);
  nlohmann::json verdict = {{"ok", ok}, {"checked", checked}, {"wrong", wrong ? wrong->text : ""},
                            {"wrong_seq", wrong && wrong->seq ? *wrong->seq : 0}};
  const Deadline gather_by = epoch + millis(limit_s + 5);
  if (r != 0) {
    world.send(0, control_tag::kReplayDump, rec.to_json(reason).dump(), gather_by);
    world.send(0, control_tag::kReplayChecked, verdict.dump(), gather_by);
    res.seconds = std::chrono::duration<double>(Clock::now() - epoch).count();
    return res;  // rank 0 reports
  }
  std::vector<std::string> texts{rec.to_json(reason).dump()};
  std::vector<nlohmann::json> verdicts{verdict};
  bool all_ok = ok;
  for (int q = 1; q < p; ++q) {
    auto d = world.recv(q, control_tag::kReplayDump, gather_by);
    auto v = world.recv(q, control_tag::kReplayChecked, gather_by);
    if (!d || !v) {
      res.hung = true;
      continue;
    }
    texts.push_back(*d);
    verdicts.push_back(nlohmann::json::parse(*v));
    all_ok = all_ok && verdicts.back().at("ok").get<bool>();
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - epoch).count();
  std::vector<RankDump> dumps;
  for (const auto& t : texts) dumps.push_back(rank_dump_from_json(nlohmann::json::parse(t)));
  res.first_failure = first_failure(dumps);
  AnalysisOptions ao;
  ao.run_finished = all_ok && !res.hung;
  if (res.guarded) {
    res.diagnoses = analyze(dumps, ao);
    if (auto v = guard.violation()) {
      std::erase_if(res.diagnoses, [&](const Diagnosis& d) { return d.kind == v->kind; });
      res.diagnoses.insert(res.diagnoses.begin(), *v);
      res.time_to_diagnosis = guard.violation_time();
    }
  } else {
    // Production: the dumps written on the deadline, and the diagnosis from the files alone.
    res.dump_dir = o.dump_dir;
    if (res.dump_dir.empty())
      res.dump_dir = (std::filesystem::temp_directory_path() /
                      fmt::format("collcheck-dumps-mpi-{}-{}", ::getpid(), epoch.time_since_epoch().count()))
                         .string();
    std::filesystem::create_directories(res.dump_dir);
    for (size_t q = 0; q < texts.size(); ++q)
      write_file_atomically((std::filesystem::path(res.dump_dir) / fmt::format("rank-{}.json", dumps[q].rank)).string(),
                            texts[q]);
    dumps = load_dumps(res.dump_dir);
    res.diagnoses = analyze(dumps, ao);
  }
  if (!res.diagnoses.empty() && res.time_to_diagnosis < 0)
    res.time_to_diagnosis = std::chrono::duration<double>(Clock::now() - epoch).count();
  const bool corrupted = has_diagnosis(res, {DiagnosisKind::CorruptedPayload});
  const bool mismatch = has_diagnosis(res, {DiagnosisKind::ShapeMismatch, DiagnosisKind::OrderMismatch});
  for (size_t q = 0; q < verdicts.size(); ++q) res.results_checked += verdicts[q].at("checked").get<size_t>();
  if (!mismatch && !corrupted) {
    for (size_t q = 0; q < verdicts.size(); ++q) {
      const std::string text = verdicts[q].at("wrong").get<std::string>();
      if (text.empty()) continue;
      Diagnosis d;
      d.kind = DiagnosisKind::WrongResult;
      d.ranks = {dumps[q].rank};
      d.seq = verdicts[q].at("wrong_seq").get<uint64_t>();
      d.text = text;
      res.diagnoses.push_back(d);
      break;
    }
  }
  res.dumps = std::move(dumps);
  return res;
}

bool expectation_holds(const ExpectSpec& e, const ReplayResult& r, std::string* why) {
  auto say = [&](std::string w) {
    if (why) *why = std::move(w);
    return false;
  };
  if (e.diagnosis == "none") {
    if (r.diagnoses.empty()) return true;
    return say(fmt::format("expected no diagnosis, got {}", diagnosis_name(r.diagnoses.front().kind)));
  }
  if (r.diagnoses.empty()) return say(fmt::format("expected {}, got no diagnosis", e.diagnosis));
  const Diagnosis& d = r.diagnoses.front();
  if (diagnosis_name(d.kind) != e.diagnosis)
    return say(fmt::format("expected {}, got {} first", e.diagnosis, diagnosis_name(d.kind)));
  if (!e.ranks.empty()) {
    auto a = e.ranks, b = d.ranks;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) return say(fmt::format("expected ranks [{}], the diagnosis names [{}]", fmt::join(a, ", "), fmt::join(b, ", ")));
  }
  if (e.seq && d.seq != e.seq)
    return say(fmt::format("expected call #{}, the diagnosis names #{}", *e.seq, d.seq ? std::to_string(*d.seq) : "none"));
  if (e.edge && d.edge != e.edge)
    return say(fmt::format("expected edge {} -> {}, the diagnosis names {}", e.edge->first, e.edge->second,
                           d.edge ? fmt::format("{} -> {}", d.edge->first, d.edge->second) : "none"));
  for (const auto& f : e.fields)
    if (std::find(d.fields.begin(), d.fields.end(), f) == d.fields.end())
      return say(fmt::format("expected field '{}' among the differing fields [{}]", f, fmt::join(d.fields, ", ")));
  return true;
}

}  // namespace collcheck
