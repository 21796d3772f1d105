// verify's steps after a case fails (verify_shrink.h).
#include "properties/verify_shrink.h"

#include <fmt/format.h>

#include <functional>
#include <thread>

#include "harness/model/data.h"
#include "properties/generators.h"

namespace collcheck {

using Seconds = std::chrono::duration<double>;

CaseOutcome run_retrying(const VerifyOptions& opt, CaseExecutor& exec, const Case& c) {
  CaseOutcome o = exec.run(c);
  for (int k = 0; o.harness_error && !o.interrupted && k < 3; ++k) {
    std::this_thread::sleep_for(std::chrono::duration<double>(opt.harness_retry_s * (1 << k)));
    o = exec.run(c);
  }
  return o;
}

bool stopping(const VerifyOptions& o, VerifyResult& r) {
  if (o.should_stop && o.should_stop()) r.interrupted = true;
  return r.interrupted;
}

bool cut(const CaseOutcome& oc, VerifyResult& r) {
  if (oc.interrupted) r.interrupted = r.case_cut = true;
  return oc.interrupted;
}

void confirm(const VerifyOptions& o, CaseExecutor& exec, VerifyResult& r, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    if (stopping(o, r)) return;
    const CaseOutcome so = exec.run(r.minimal);
    if (cut(so, r)) return;
    if (so.harness_error) continue;  // no verdict either way
    ++r.replays;
    // Any property: a race shows in whichever call it hits (the call, its
    // repeat, the async twin), so the property it fails can vary.
    if (!so.ok) ++r.replay_failures;
    if (r.replays == 3 && r.replay_failures == 3) return;
  }
}

uint64_t flaky_perturbation(const VerifyOptions& o, uint64_t k) {
  return splitmix64(o.seed ^ (k * 0x9e3779b97f4a7c15ull)) | 1;
}

namespace {

// One accepted shrink step: the case (with its further shrinks) and what it failed.
struct Step {
  rc::Shrinkable<Case> c;
  Failure f;
};

// Shrinks from path.back(): takes the first shrink that still fails `kept`'s
// property, the one the case failed (first or behind an earlier one, or one
// that implies it: shrink_keeps), repeats. Each step keeps what its case
// failed first (what a replay of it shows). Each shrink is run
// up to `tries` times and kept if one run fails.
void shrink_pass(const VerifyOptions& o, CaseExecutor& exec, VerifyResult& r, std::vector<Step>& path,
                 const Failure& kept, size_t tries, Clock::time_point s0, const std::function<void()>& shrinking) {
  for (bool progressed = true; progressed && !r.shrink_budget_reached;) {
    progressed = false;
    auto seq = path.back().c.shrinks();
    while (auto m = seq.next()) {
      for (size_t t = 0; t < tries && !progressed; ++t) {
        if (Seconds(Clock::now() - s0).count() > o.shrink_budget_s || r.shrink_runs >= o.shrink_max_runs ||
            stopping(o, r)) {
          r.shrink_budget_reached = true;
          return;
        }
        const CaseOutcome so = run_retrying(o, exec, m->value());
        if (cut(so, r)) {
          r.shrink_budget_reached = true;
          return;
        }
        ++r.shrink_runs;
        shrinking();
        if (!so.harness_error && !so.ok && shrink_keeps(so, kept)) {
          path.push_back({*m, so.failure});
          ++r.shrink_steps;
          progressed = true;
        }
      }
      if (progressed) break;
    }
  }
}

// The failing case `c` run twice more: true where one run passed (not a
// verdict on the case: it failed once).
bool flaky_from_the_start(const VerifyOptions& o, CaseExecutor& exec, const Case& c, VerifyResult& r) {
  for (int k = 0; k < 2; ++k) {
    if (stopping(o, r)) return false;
    const CaseOutcome again = run_retrying(o, exec, c);
    if (cut(again, r)) return false;
    if (!again.harness_error && again.ok) return true;
  }
  return false;
}

// Replays path.back() `n` times (confirm); where it never fails again, steps
// back along the path to the smallest case that does (the first failed once,
// so the walk ends there at worst).
// Returns the steps undone.
size_t settle(const VerifyOptions& o, CaseExecutor& exec, VerifyResult& r, const std::vector<Step>& path, size_t n,
              size_t failing_case, Events& ev) {
  r.minimal = path.back().c.value();
  r.failure = path.back().f;
  size_t back = 0;
  ev.progress({.limit_from_now_s = 0.0,
               .phase = fmt::format("case {} failed ({}): replaying the minimal case", failing_case, r.failure.property)});
  confirm(o, exec, r, n);
  for (size_t k = path.size() - 1; r.replay_failures == 0 && !r.interrupted && k-- > 0;) {
    r.minimal = path[k].c.value();
    r.failure = path[k].f;
    r.replays = r.replay_failures = 0;
    ++back;
    confirm(o, exec, r, n);
  }
  r.stepped_back += back;
  return back;
}

// A flaky failing case: the schedule, of its own and three perturbations
// (the seeds that the search of the replays uses), that fails most often in
// kScheduleRuns runs, where that is not its own. A rare race shrinks only
// where it shows: at 1 run in 20, no step of five runs would be kept.
std::optional<Step> likeliest_schedule(const VerifyOptions& o, CaseExecutor& exec, const Step& failed,
                                       VerifyResult& r) {
  const Case c = failed.c.value();
  std::optional<Step> best;
  size_t most = 0;
  for (uint64_t k = 0; k <= 3; ++k) {
    Case s = c;
    if (k > 0) s.perturb = flaky_perturbation(o, k);
    if (k > 0 && s.perturb == c.perturb) continue;
    size_t fails = 0;
    std::optional<Failure> f;
    for (size_t n = 0; n < kScheduleRuns; ++n) {
      if (stopping(o, r)) return std::nullopt;
      const CaseOutcome so = run_retrying(o, exec, s);
      if (cut(so, r)) return std::nullopt;
      ++r.schedule_runs;
      if (so.harness_error || so.ok || !shrink_keeps(so, failed.f)) continue;
      ++fails;
      if (!f) f = so.failure;
    }
    if (fails > most) {
      most = fails;
      r.schedule_failures = fails;
      r.shrink_schedule = k == 0 ? 0 : s.perturb;
      best.reset();
      if (k > 0) best = Step{shrinkable_case(s), *f};
    }
  }
  return best;
}

}  // namespace

void shrink_failure(const VerifyOptions& o, CaseExecutor& exec, VerifyResult& r, const rc::Shrinkable<Case>& sh,
                    const Failure& f, Events& ev) {
  const auto s0 = Clock::now();
  r.original_property = f.property;
  // No more cases: the time left is the shrinking's.
  ev.progress({.count = std::pair{r.cases_run, size_t{0}}, .limit_from_now_s = o.shrink_budget_s});
  const auto shrinking = [&] {
    ev.progress({.phase = fmt::format("case {} failed ({}): shrinking, {} runs, {} steps, {:.0f} s of {:.0f} s",
                                      r.failing_case, f.property, r.shrink_runs, r.shrink_steps,
                                      Seconds(Clock::now() - s0).count(), o.shrink_budget_s)});
  };
  // Every accepted step, for when the smallest case does not fail again (a
  // flaky failure can make a shrink that only failed by chance look good).
  std::vector<Step> path{{sh, f}};
  shrinking();
  // Flaky (a race): a step that passes may pass by chance, so each is run up
  // to kFlakyTries times, under the schedule that shows it most. The failing
  // case runs twice more to see; where it failed both times, the replays of
  // the minimal case tell, and the shrinking goes on from the smallest case
  // that fails again. A steady failure never pays the tries (nor one in the
  // simulated world found on its own: its schedule is the seed's).
  bool shrink = true;
  if (flaky_from_the_start(o, exec, sh.value(), r)) {
    r.shrink_tries = kFlakyTries;
    if (auto s = likeliest_schedule(o, exec, path[0], r)) path[0] = std::move(*s);
    // Failed in none of those runs: no step would show it in five, and
    // shrinking would spend its whole budget finding nothing.
    shrink = r.schedule_runs == 0 || r.schedule_failures > 0;
  }
  if (shrink) shrink_pass(o, exec, r, path, f, std::max<size_t>(r.shrink_tries, 1), s0, shrinking);
  const size_t n = minimal_replays(o);
  const size_t undone = settle(o, exec, r, path, n, r.failing_case, ev);
  if (r.shrink_tries == 0 && r.flaky() && !r.interrupted && !r.shrink_budget_reached) {
    r.shrink_tries = kFlakyTries;
    path.erase(path.end() - static_cast<std::ptrdiff_t>(undone), path.end());
    const size_t steps = r.shrink_steps;
    shrink_pass(o, exec, r, path, f, kFlakyTries, s0, shrinking);
    if (r.shrink_steps > steps) {
      r.replays = r.replay_failures = 0;
      (void)settle(o, exec, r, path, n, r.failing_case, ev);
    }
  }
}

}  // namespace collcheck
