// The earlier cases a failure needs (earlier_cases.h).
#include "properties/earlier_cases.h"

#include <algorithm>

#include "properties/case.h"
#include "properties/verify.h"

namespace collcheck {

std::optional<EarlierCases> find_earlier_cases(CaseExecutor& exec, const std::vector<Case>& history, const Case& c,
                                               size_t max_runs, const std::function<bool()>& stop) {
  EarlierCases e;
  // Whether `before`, then c, fails in a fresh process; false when out of
  // runs or asked to stop (never a false "it fails").
  auto fails = [&](const std::vector<Case>& before) {
    if (e.fresh_runs >= max_runs || (stop && stop())) return false;
    ++e.fresh_runs;
    const auto o = exec.run_fresh(c, before);
    return o && !o->ok && !o->interrupted && !o->harness_error;
  };
  if (history.empty() || !fails(history)) return std::nullopt;
  // The shortest suffix that fails: 1, 2, 4, ... cases, then a binary search
  // between the last that passed and the first that failed.
  auto suffix = [&](size_t k) { return std::vector<Case>(history.end() - static_cast<ptrdiff_t>(k), history.end()); };
  size_t lo = 0, hi = history.size();  // suffix(lo) passes (or is empty), suffix(hi) fails
  for (size_t k = 1; k < history.size(); k *= 2) {
    if (fails(suffix(k))) {
      hi = k;
      break;
    }
    lo = k;
  }
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (fails(suffix(mid))) hi = mid;
    else lo = mid;
  }
  e.cases = suffix(hi);
  // Leave out chunks, halving their size, while it still fails (ddmin's
  // complement step); the last pass, with chunks of one, also proves that no
  // single case can go.
  for (size_t chunk = std::max<size_t>(1, e.cases.size() / 2);; chunk = std::max<size_t>(1, chunk / 2)) {
    bool all_tried = true;
    for (size_t at = 0; at < e.cases.size();) {
      if (e.cases.size() == 1 && chunk == 1) break;  // the one case it needs
      std::vector<Case> without(e.cases.begin(), e.cases.begin() + static_cast<ptrdiff_t>(at));
      const size_t end = std::min(e.cases.size(), at + chunk);
      without.insert(without.end(), e.cases.begin() + static_cast<ptrdiff_t>(end), e.cases.end());
      if (e.fresh_runs >= max_runs || (stop && stop())) {
        all_tried = false;
        break;
      }
      if (!without.empty() && fails(without)) e.cases = std::move(without);  // the same `at` again
      else at = end;
    }
    if (chunk == 1) {
      e.minimal = all_tried;
      break;
    }
    if (!all_tried) break;
  }
  return e;
}

void check_in_fresh_process(const VerifyOptions& o, RecordingExecutor& exec, VerifyResult& r) {
  auto stop = [&] { return o.should_stop && o.should_stop(); };
  // Up to three fresh runs, for a failure steady here (a flaky one stays flaky).
  for (int k = 0; k < 3 && r.replay_failures > 0 && !r.flaky() && !r.fresh_failed; ++k) {
    if (stop()) {
      r.interrupted = true;
      return;
    }
    const auto fresh = exec.run_fresh(r.minimal);
    if (!fresh) {
      r.fresh_impossible = true;
      r.fresh_why = exec.why_no_fresh();
      break;
    }
    if (fresh->interrupted) {
      r.interrupted = r.case_cut = true;
      return;
    }
    if (fresh->harness_error) break;
    r.fresh_checked = true;
    r.fresh_failed = !fresh->ok;
  }
  // What ran before the minimal case's replays (those are left out: the
  // minimal case runs last anyway).
  std::vector<Case> history = exec.history();
  const std::string minimal = encode_case(r.minimal);
  while (!history.empty() && encode_case(history.back()) == minimal) history.pop_back();
  auto keep_tail = [&] {
    const size_t keep = std::min<size_t>(history.size(), 256);
    r.history_tail.assign(history.end() - static_cast<ptrdiff_t>(keep), history.end());
  };
  if (r.fresh_impossible && r.replay_failures > 0 && !r.flaky()) keep_tail();
  if (!r.depends_on_earlier_cases()) return;
  // Each try is one fresh process running up to the whole history: bounded.
  if (auto e = find_earlier_cases(exec, history, r.minimal, 40, stop)) {
    r.earlier = std::move(e->cases);
    r.earlier_minimal = e->minimal;
    r.earlier_fresh_runs = e->fresh_runs;
  } else {
    // Not reproduced from the cases alone (timing, or state from before the
    // recorded history): the replay still keeps the last of them.
    r.earlier_fresh_runs = std::min<size_t>(1, history.size());
    keep_tail();
  }
}

}  // namespace collcheck
