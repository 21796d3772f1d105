#include "harness/run/scenario_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

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
#include "harness/world/thread_world.h"
#include "harness/model/atomic_file.h"

#include <nlohmann/json.hpp>

namespace collcheck {

namespace {

// A call of at most this many elements over all ranks is checked whole on
// every rank; a larger one on each rank's share (check_outs).
constexpr size_t kWholeCheckElements = 16384;

// The waited outputs a rank keeps to check at the end of the run: 512 MiB over
// the ranks of the world, 1 MiB at least (RankResults).
uint64_t kept_output_budget(int p) {
  return std::max<uint64_t>((uint64_t{512} << 20) / static_cast<uint64_t>(std::max(p, 1)), uint64_t{1} << 20);
}

struct CallOut {
  CallStep call;
  uint64_t seq = 0;
  uint64_t seed = 0;
  std::vector<std::byte> out;
  bool waited = false;
  bool settled = false;  // checked, hashed and its buffer released (RankResults)
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

// One waited result of rank r against the oracle (exact data: compared bit
// for bit), on r's share of the elements only: every rank holds the same bits
// when the run is right, which the root checks from each result's hash, so
// together the shares cover every element at O(p) work per call, not O(p^2).
// A wrong share is checked whole, for the full detail.
std::optional<Diagnosis> check_out(int p, int r, const CallOut& c) {
  const size_t n = c.call.count, es = dtype_size(c.call.dtype);
  const size_t lo = n * static_cast<size_t>(r) / static_cast<size_t>(p);
  const size_t hi = n * static_cast<size_t>(r + 1) / static_cast<size_t>(p);
  const Reduction red = resolve_reduction(c.call.dtype, c.call.op, p, c.call.scalar);
  auto check = [&](size_t from, size_t to) {
    std::vector<std::vector<std::byte>> ins(static_cast<size_t>(p));
    std::vector<const void*> ptrs;
    for (int q = 0; q < p; ++q) {
      auto& in = ins[static_cast<size_t>(q)];
      in.resize((to - from) * es);
      for (size_t i = from; i < to; ++i)
        store_element(c.call.dtype, in.data(), i - from,
                      input_element(c.call.dtype, c.call.op, p, q, i, c.seed, DataClass::Exact));
      ptrs.push_back(in.data());
    }
    return check_all_reduce(red, ptrs, c.out.data() + from * es, to - from);
  };
  // A small call is checked whole on every rank (p * count inputs: cheap);
  // a large one on this rank's share first.
  const bool small = n * static_cast<size_t>(p) <= kWholeCheckElements;
  if (!small && check(lo, hi).wrong == 0) return std::nullopt;
  const CheckSummary cs = check(0, n);
  if (cs.wrong == 0) return std::nullopt;
  Diagnosis d;
  d.kind = DiagnosisKind::WrongResult;
  d.ranks = {r};
  d.seq = c.seq;
  d.text = fmt::format("call #{} ({}) on rank {}: {} of {} elements wrong; {}", c.seq, c.call.tag, r, cs.wrong,
                       cs.checked, cs.first_wrong_detail);
  return d;
}

// A rank's results: every call's output buffer, each checked against the
// oracle and hashed once its wait has returned, then released. The waited
// outputs are kept while they fit in the rank's budget, and checked at the end
// of the run (a late write into a waited buffer shows); past it, the oldest are
// checked and released as the run goes, so memory stays O(budget + one call),
// not O(sum of counts).
class RankResults {
 public:
  RankResults() = default;
  RankResults(int p, int r, uint64_t budget) : p_(p), r_(r), budget_(budget ? budget : kept_output_budget(p)) {}

  // A new call's output; its index for waited().
  size_t add(CallOut c) {
    outs_.push_back(std::move(c));
    return outs_.size() - 1;
  }
  CallOut& at(size_t i) { return outs_[i]; }
  // Call i's wait returned: its output is final.
  void waited(size_t i) {
    outs_[i].waited = true;
    kept_ += outs_[i].out.size();
    while (kept_ > budget_ && next_ < outs_.size()) settle_oldest();
  }
  // The end of the rank's program (or its failure): every waited output not
  // yet checked is checked. A call never waited keeps its buffer (the
  // implementation may still write it) and is not judged.
  void finish() {
    for (size_t i = 0; i < outs_.size(); ++i)
      if (outs_[i].waited && !outs_[i].settled) settle(outs_[i]);
  }
  size_t checked() const { return checked_; }
  const std::optional<Diagnosis>& wrong() const { return wrong_; }
  // [seq, hash] of each waited result, by call number.
  nlohmann::json hashes() const {
    nlohmann::json h = nlohmann::json::array();
    for (const auto& [seq, hash] : hashes_) h.push_back({seq, hash});
    return h;
  }

 private:
  void settle_oldest() {
    for (; next_ < outs_.size(); ++next_)
      if (outs_[next_].waited && !outs_[next_].settled) {
        settle(outs_[next_++]);
        return;
      }
  }
  void settle(CallOut& c) {
    ++checked_;
    // The first wrong result in call order is the one reported.
    if (!wrong_ || c.seq < *wrong_->seq)
      if (auto d = check_out(p_, r_, c)) wrong_ = std::move(d);
    hashes_[c.seq] = fnv1a(c.out.data(), c.out.size());
    kept_ -= c.out.size();
    std::vector<std::byte>().swap(c.out);
    c.settled = true;
  }
  int p_ = 1, r_ = 0;
  uint64_t budget_ = 0, kept_ = 0;
  std::vector<CallOut> outs_;  // a settled one holds no buffer
  size_t next_ = 0;            // no output before it is waited and unsettled
  size_t checked_ = 0;
  std::optional<Diagnosis> wrong_;
  std::map<uint64_t, uint64_t> hashes_;
};

// What one rank's program needs from the world it runs in.
struct RankEnv {
  const Scenario& s;
  int rank;
  int p;
  ImplPtr impl;
  std::chrono::milliseconds timeout;
  FlightRecorder& rec;
  RankResults& outs;
  std::function<void(const CallFingerprint&)> before_call;  // guarded mode, or empty
  std::function<void()> stall;  // a stalled rank: wait, never entering the remaining calls
  std::vector<FaultTally>& tallies;  // what each fault's links saw and changed here, at the end
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
  // However the program ends (a failed call throws), the faults' tallies are taken.
  struct TakeTallies {
    RankEnv& env;
    const std::vector<std::unique_ptr<Links>>& keep;
    ~TakeTallies() { env.tallies = fault_tallies(env.s, keep); }
  } take{env, keep};
  auto links = recording_links(faulty, rec);
  CommOptions co(s.impl, env.timeout, env.impl);
  co.recorder = &rec;
  co.poison_async = true;
  co.before_call = env.before_call;
  Communicator comm(*links, co);
  // An async call's Work, with its input (which must outlive the call).
  struct Pending {
    std::unique_ptr<Work> work;
    WaitAt at;
    size_t index;
    std::vector<std::byte> input;
  };
  std::vector<Pending> pending;
  auto& mine = env.outs;
  auto wait_for = [&](WaitAt at) {
    for (auto& pw : pending) {
      if (pw.work && pw.at == at) {
        pw.work->wait();
        pw.work.reset();
        std::vector<std::byte>().swap(pw.input);
        mine.waited(pw.index);
      }
    }
    // Waited ones are done with; a never-waited one keeps its input to the end.
    std::erase_if(pending, [](const Pending& pw) { return !pw.work; });
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
    const size_t at = mine.add(std::move(co_out));
    CallOut& out = mine.at(at);
    if (c.async) {
      auto w = comm.all_reduce_async(input.data(), out.out.data(), c.count, c.dtype, c.op, c.scalar, c.tag);
      if (c.read_before_wait) {
        rec.read_output(out.seq);
        std::vector<std::byte> seen(out.out);  // the program reads its output here
        (void)seen;
      }
      // The input must outlive the async call: keep it with the Work.
      pending.push_back({std::move(w), c.wait, at, std::move(input)});
    } else {
      comm.all_reduce(input.data(), out.out.data(), c.count, c.dtype, c.op, c.scalar, c.tag);
      mine.waited(at);
    }
    ++index;
  }
  wait_for(WaitAt::Next);
  wait_for(WaitAt::End);
  // WaitAt::Never: the Work is dropped here without wait(); the
  // communicator logs it and the recorder shows it completed, not waited.

}

namespace {

// The run's limit: every call may take its deadline twice (in guarded mode a
// rank may first wait a deadline for the others' fingerprints), plus the sleeps.
double run_limit_s(const Scenario& s) {
  double longest = 0;
  for (int r = 0; r < s.ranks; ++r) {
    double t = 0;
    for (const auto& st : s.program(r)) t += st.kind == Step::Sleep ? st.sleep_ms / 1e3 : 2 * s.deadline_s;
    longest = std::max(longest, t);
  }
  return longest + 2 * s.deadline_s + 2;
}

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
                        {"faults", faults},
                        {"hashes", outs.hashes()}}
      .dump();
}

}  // namespace

ReplayResult replay_scenario(const Scenario& in, const ReplayOptions& o) {
  ThreadWorld world(in.ranks);
  return replay_scenario(in, o, world);
}

ReplayResult replay_scenario(const Scenario& in, const ReplayOptions& o, World& world) {
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
  if (auto why = impl->unsupported_world(world.kind() == "mpi" ? WorldKind::Mpi : WorldKind::Threads))
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
  const double limit_s = run_limit_s(s);
  const auto timeout = millis(s.deadline_s);
  // What the rank bodies touch lives on the heap, owned by the bodies too: a
  // body that never returns (stuck inside the implementation) keeps it alive
  // after this function has returned.
  struct Shared {
    Scenario s;
    ImplPtr impl;
    std::unique_ptr<CallGuard> guard;
    std::vector<std::unique_ptr<FlightRecorder>> recs;
    std::vector<RankResults> outs;
    std::vector<std::string> verdicts;
    std::vector<std::vector<FaultTally>> tallies;
  };
  auto sh = std::make_shared<Shared>();
  sh->s = s;
  sh->impl = impl;
  sh->guard = world.call_guard(epoch, timeout);
  sh->recs.resize(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r)
    if (world.holds(r)) {
      sh->recs[static_cast<size_t>(r)] = std::make_unique<FlightRecorder>(r, p, epoch);
      sh->recs[static_cast<size_t>(r)]->set_run(run_id, run_what);
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
        RankEnv env{sh->s, r, p, sh->impl, timeout, *sh->recs[ri], sh->outs[ri], {}, {}, sh->tallies[ri]};
        if (guarded) env.before_call = [sh, r](const CallFingerprint& fp) { sh->guard->check(r, fp); };
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
  std::vector<std::string> texts(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r)
    if (world.holds(r)) texts[static_cast<size_t>(r)] = recs[static_cast<size_t>(r)]->to_json(reason).dump(1);
  const Deadline gather_by = std::max(epoch + millis(limit_s + 5), Clock::now() + std::chrono::seconds(5));
  const auto dump_texts = world.gather(texts, gather_by);
  const auto verdict_texts = world.gather(verdicts, gather_by);
  res.seconds = std::chrono::duration<double>(Clock::now() - epoch).count();
  if (!world.root()) return res;  // rank 0 reports

  std::vector<RankDump> dumps;
  std::vector<std::string> dumped;
  std::vector<nlohmann::json> checked;
  for (int q = 0; q < p; ++q) {
    // A rank whose body never returned has a dump (what it recorded so far)
    // but no verdict; a rank whose process is gone has neither.
    const auto& d = dump_texts[static_cast<size_t>(q)];
    const auto& v = verdict_texts[static_cast<size_t>(q)];
    if (!d || !v || v->empty()) res.hung = true;
    if (!d) continue;
    dumps.push_back(rank_dump_from_json(nlohmann::json::parse(*d)));
    dumped.push_back(*d);
    checked.push_back(v && !v->empty() ? nlohmann::json::parse(*v)
                                        : nlohmann::json{{"checked", 0}, {"wrong", ""}, {"wrong_seq", 0}});
  }
  res.first_failure = first_failure(dumps);

  AnalysisOptions ao;
  ao.run_finished = run.ok() && !res.hung;
  // Unguarded mode is production: dumps on the deadline, and the diagnosis
  // from the files alone. Guarded mode writes them when asked to.
  if (!guarded || !o.dump_dir.empty()) {
    res.dump_dir = !o.dump_dir.empty() ? o.dump_dir : temp_dir("dumps", epoch);
    std::filesystem::create_directories(res.dump_dir);
    for (size_t i = 0; i < dumps.size(); ++i)
      write_file_atomically((std::filesystem::path(res.dump_dir) / fmt::format("rank-{}.json", dumps[i].rank)).string(),
                            dumped[i]);
  }
  if (guarded) {
    res.diagnoses = analyze(dumps, ao);
    if (auto v = guard->violation()) {
      // The guard's finding is the same classification, made before the call.
      std::erase_if(res.diagnoses, [&](const Diagnosis& d) { return d.kind == v->kind; });
      res.diagnoses.insert(res.diagnoses.begin(), *v);
      res.time_to_diagnosis = guard->violation_time();
    }
  } else {
    dumps = load_dumps(res.dump_dir);
    res.diagnoses = analyze(dumps, ao);
  }

  // Every waited result against the oracle (exact data: compared bit for bit),
  // each rank's counted; the first wrong one is a diagnosis unless the calls
  // disagreed or a payload was corrupted on purpose.
  const bool corrupted = has_diagnosis(res, {DiagnosisKind::CorruptedPayload});
  const bool mismatch = has_diagnosis(res, {DiagnosisKind::ShapeMismatch, DiagnosisKind::OrderMismatch});
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
    d.ranks = {dumps[i].rank};
    d.seq = checked[i].at("wrong_seq").get<uint64_t>();
    d.text = text;
    res.diagnoses.push_back(d);
    wrong = true;
    break;
  }
  // Each rank checked its share of every result; the shares cover the whole
  // only if every rank holds the same bits. At the first call where they do
  // not, the ranks outside the largest group of equal results are named.
  if (!wrong && !mismatch && !corrupted && !checked.empty()) {
    std::map<uint64_t, std::map<uint64_t, std::vector<int>>> by_seq;  // seq -> hash -> ranks
    for (size_t i = 0; i < checked.size(); ++i)
      for (const auto& h : checked[i].value("hashes", nlohmann::json::array()))
        by_seq[h.at(0).get<uint64_t>()][h.at(1).get<uint64_t>()].push_back(dumps[i].rank);
    for (const auto& [seq, groups] : by_seq) {
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
      const CallRecord* rec = nullptr;
      for (const auto& cr : dumps[0].calls)
        if (cr.seq == seq) rec = &cr;
      d.text = fmt::format("call #{} ({}): the ranks hold different results ({}); each rank's share of the {} "
                           "elements matched the oracle, so a result is wrong outside its rank's share",
                           seq, rec ? rec->tag : "?", held, rec ? rec->count : 0);
      res.diagnoses.push_back(d);
      break;
    }
  }
  if (res.diagnoses.empty() && !run.ok()) res.unexplained = run.failures();
  if (!res.diagnoses.empty() && res.time_to_diagnosis < 0)
    res.time_to_diagnosis = std::chrono::duration<double>(Clock::now() - epoch).count();
  res.dumps = std::move(dumps);
  return res;
}

uint64_t replay_memory_needed(const Scenario& s, int ranks, uint64_t kept_output_bytes) {
  const uint64_t saturated = ~uint64_t{0};
  const uint64_t budget = kept_output_bytes ? kept_output_bytes : kept_output_budget(s.ranks);
  uint64_t worst_rank = 0;
  for (int r = 0; r < s.ranks; ++r) {
    // Bytes of every call, of async calls waited only at the end (or never:
    // input and output held to the end), the largest call, the oracle's scratch.
    uint64_t all = 0, held = 0, largest = 0, pending = 0, check = 0;
    for (const auto& st : s.program(r)) {
      if (st.kind != Step::Call) continue;
      const auto bytes = checked_mul(st.call.count, dtype_size(st.call.dtype));
      if (!bytes) return saturated;
      // The oracle's inputs: p whole buffers for a small call, p shares (about
      // one buffer) for a large one, as check_out does.
      const uint64_t p = static_cast<uint64_t>(s.ranks), es = dtype_size(st.call.dtype);
      check = std::max(check, st.call.count * p <= kWholeCheckElements ? *bytes * p : *bytes + p * es);
      largest = std::max(largest, *bytes);
      const auto a = checked_add(all, *bytes);
      if (!a) return saturated;
      all = *a;
      if (st.call.async && st.call.wait != WaitAt::Next) held += *bytes;  // held <= all
      if (st.call.async && st.call.wait == WaitAt::Next) pending = std::max(pending, *bytes);
    }
    // Outputs: those held to the end, the rest up to the kept budget and one
    // call; inputs: those held, the current call's and one pending; the
    // messages in flight on the links (a call's bytes, about); the scratch.
    // Each term but `all` is at most 2^50 or so (2^48 bytes a buffer).
    auto rank = checked_add(std::min(all - held, budget + largest), 2 * largest + pending + check);
    if (rank) rank = checked_add(*rank, held);
    if (rank) rank = checked_add(*rank, held);
    if (!rank) return saturated;
    worst_rank = std::max(worst_rank, *rank);
  }
  const auto n = checked_mul(worst_rank, static_cast<uint64_t>(ranks));
  return n ? *n : saturated;
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
