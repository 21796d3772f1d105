#include "properties/detection.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "faults/nemesis.h"
#include "impl/algorithm.h"
#include "harness/model/data.h"

namespace collcheck {

Scenario DetectionCase::scenario() const {
  Scenario s = clean;
  s.guarded = guarded;
  if (fault) {
    s.faults = {*fault};
    s.expect = find_nemesis(fault->kind)->expected(clean, *fault);
  } else {
    s.expect = ExpectSpec{"none", {}, {}, {}, {}, {}};
  }
  return s;
}

namespace {

class DetectionGen {
 public:
  DetectionGen(int lo, int hi) : lo_(lo), hi_(hi) {}
  rc::Shrinkable<DetectionCase> operator()(const rc::Random& random, int) const {
    rc::Random rnd = random;
    auto next = [&] { return rnd.next(); };
    DetectionCase c;
    Scenario& s = c.clean;
    s.file = "generated";
    s.name = "generated";
    s.ranks = lo_ + static_cast<int>(next() % static_cast<uint64_t>(hi_ - lo_ + 1));
    const auto algos = algorithms();
    s.impl = std::string(algos[next() % algos.size()].name);
    s.deadline_s = 0.3;
    const int calls = 1 + static_cast<int>(next() % 4);
    const DType dtypes[] = {DType::Float32, DType::BFloat16, DType::Int32, DType::Float16};
    const RedOp ops[] = {RedOp::Sum, RedOp::Max, RedOp::Avg, RedOp::Min};
    for (int i = 0; i < calls; ++i) {
      Step st;
      st.kind = Step::Call;
      st.call.tag = fmt::format("t{}", i);
      st.call.count = 1 + next() % 2048;
      st.call.dtype = dtypes[next() % 4];
      st.call.op = ops[next() % 4];
      if (next() % 4 == 0) {
        st.call.async = true;
        st.call.wait = next() % 2 ? WaitAt::Next : WaitAt::End;
      }
      s.defaults.push_back(st);
      if (next() % 5 == 0) {
        Step sl;
        sl.kind = Step::Sleep;
        sl.sleep_ms = static_cast<double>(next() % 3);
        s.defaults.push_back(sl);
      }
    }
    c.guarded = next() % 2 == 0;
    // One case in eight is clean; the rest get one fault of a random kind that
    // the scenario can carry (each nemesis says which it fits, and how it
    // adapts the scenario).
    if (next() % 8 != 0) {
      std::vector<const NemesisInfo*> ok;
      for (const auto& n : nemeses())
        if (!n.fits || n.fits(s)) ok.push_back(&n);
      const NemesisInfo* n = ok[next() % ok.size()];
      if (n->adapt) n->adapt(s);
      c.fault = n->random(s, next());
      c.fault->line = 0;
    }
    return rc::shrinkable::just(std::move(c));
  }

 private:
  int lo_, hi_;
};

}  // namespace

rc::Gen<DetectionCase> gen_detection_case(int min_ranks, int max_ranks) {
  return rc::Gen<DetectionCase>(DetectionGen(min_ranks, max_ranks));
}

namespace {

// Sanitizer builds run the harness 2-15 times slower (TSan most): the margin
// for computing, beyond the waits a case is entitled to, grows with them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kComputeMargin = 2.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr double kComputeMargin = 2.0;
#else
constexpr double kComputeMargin = 0.75;
#endif
#else
constexpr double kComputeMargin = 0.75;
#endif

DetectionOutcome run_once(const DetectionCase& c, const Scenario& s,
                          const std::function<ReplayResult(const Scenario&)>& replay, bool keep_failed_dumps) {
  DetectionOutcome o;
  ReplayOptions ro;
  const auto t0 = Clock::now();
  o.result = replay ? replay(s) : replay_scenario(s, ro);
  // In virtual time the run's own clock is the measure (the host's load is
  // not in it); on threads, the wall clock around the whole replay.
  o.seconds = o.result.virtual_time ? o.result.seconds : std::chrono::duration<double>(Clock::now() - t0).count();
  // The run's budget: the sleeps, and for a stalled rank one deadline (the
  // others wait that long for it), plus the slow link's delays, plus a margin.
  double sleeps = 0;
  for (const auto& st : s.defaults)
    if (st.kind == Step::Sleep) sleeps += st.sleep_ms / 1e3;
  const NemesisInfo* n = c.fault ? find_nemesis(c.fault->kind) : nullptr;
  const double extra = n && n->extra_time ? n->extra_time(s) : 0;
  o.limit_s = sleeps + extra + kComputeMargin;
  if (extra > 0) o.margin_s = o.seconds - extra - sleeps;
  std::string why;
  o.ok = expectation_holds(*s.expect, o.result, &why);
  if (!o.ok) {
    o.why = why;
  } else if (o.seconds > o.limit_s) {
    o.ok = false;
    o.slow = true;
    o.why = fmt::format("the run took {:.3f} s, longer than its limit of {:.3f} s", o.seconds, o.limit_s);
  }
  if (!o.result.dump_dir.empty() && (o.ok || !keep_failed_dumps)) {
    std::filesystem::remove_all(o.result.dump_dir);
    o.result.dump_dir.clear();
  }
  return o;
}

}  // namespace

DetectionOutcome check_detection(const DetectionCase& c, const std::function<ReplayResult(const Scenario&)>& replay,
                                 bool rerun_if_slow, bool keep_failed_dumps,
                                 const std::function<bool(bool)>& any_process) {
  const Scenario s = c.scenario();
  DetectionOutcome o = run_once(c, s, replay, keep_failed_dumps);
  // Right diagnosis, but slower than its limit: on a loaded machine that is
  // the machine (other jobs, a sanitizer). Run it once more; slow twice is a
  // failure. A hang is not excused by this: every run is bounded by its
  // deadline, and a run that waits out a deadline it should not have is slow
  // both times.
  // In virtual time a rerun would take the same time to the nanosecond: the
  // limit stands on the first run.
  // In the MPI world every process reruns, or none: when any process was
  // slow. A process that was not keeps its first outcome.
  bool rerun = o.slow && rerun_if_slow && !o.result.virtual_time;
  if (any_process) rerun = any_process(rerun);
  if (rerun) {
    DetectionOutcome again = run_once(c, s, replay, keep_failed_dumps);
    if (o.slow) {
      again.slow_once = o.why;
      o = std::move(again);
    } else if (!again.result.dump_dir.empty() && again.result.dump_dir != o.result.dump_dir) {
      std::filesystem::remove_all(again.result.dump_dir);  // kept by a rerun whose outcome is not the one kept
    }
  }
  return o;
}

Scenario fault_table_scenario(int ranks, const std::string& impl) {
  Scenario s;
  s.file = "collcheck faults";
  s.name = "a training step: three buckets and the loss";
  s.ranks = ranks;
  s.impl = impl;
  // A 4096-element ring call with p rank threads costs about 8e-6 p^2 s of CPU
  // on a 2-core node (2.0 s at p = 512, measured): four times that, at least 1 s.
  s.deadline_s = std::max(1.0, 3e-5 * ranks * ranks);
  const struct {
    const char* tag;
    size_t count;
    DType t;
    RedOp op;
    bool async;
  } calls[] = {{"bucket_0", 4096, DType::Float32, RedOp::Sum, false},
               {"bucket_1", 4096, DType::BFloat16, RedOp::Sum, true},
               {"bucket_2", 1024, DType::Float32, RedOp::Sum, false},
               {"loss", 1, DType::Float32, RedOp::Avg, false}};
  for (const auto& c : calls) {
    Step st;
    st.kind = Step::Call;
    st.call.tag = c.tag;
    st.call.count = c.count;
    st.call.dtype = c.t;
    st.call.op = c.op;
    st.call.async = c.async;
    st.call.wait = c.async ? WaitAt::Next : WaitAt::Call;
    s.defaults.push_back(st);
  }
  return s;
}

FaultSpec fault_table_instance(const Scenario& s, const std::string& nemesis) {
  const NemesisInfo* n = find_nemesis(nemesis);
  if (!n) throw ScenarioError(fmt::format("unknown fault '{}'; allowed: {}", nemesis, nemesis_choices()));
  return n->table_instance(s);
}

}  // namespace collcheck
