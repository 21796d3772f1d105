// The random cases of a verify run, in the order the seed draws them, each
// with its outcome once it has run. One at a time, or, where the executor
// has more than one worker (CaseExecutor::parallel() > 1: verify --jobs), run
// ahead by the workers, each on a thread of its own, each taking the next
// case as soon as it is free (no batch waits for its slowest case). The
// outcomes are still taken in the order one at a time would take them, and
// the cases run ahead of a failure are dropped as if never run, so that the
// run's output is the same for any --jobs. A free worker takes the next case
// in index order, except where a heavy case would otherwise end the run alone
// (case_weight): it takes the heaviest case not started where that case
// weighs at least the others not started, per worker, and in the last kTail
// cases always. Each case joins the executor's history (RecordingExecutor)
// when it is taken, in index order, whatever order the workers ran them in.
#pragma once

#include <rapidcheck.h>

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "properties/earlier_cases.h"
#include "properties/verify.h"

namespace collcheck {

// The last cases of a run, where the workers take the heaviest first: a
// large case (1 in 100, up to 1 MiB a rank) drawn near the end would
// otherwise run on while the other workers have nothing left.
inline constexpr size_t kTail = 512;
// What a case costs, roughly, in units of one element at one rank (about
// 50 ns; from 5 to 300 by dtype and op): its calls' elements times its
// ranks, plus kFixedWeight for what every case costs whatever its size
// (about 0.4 ms). Fitted to 16,000 cases' times, one job, eight seeds.
inline constexpr size_t kFixedWeight = 8192;
size_t case_weight(const Case& c);

class CaseStream {
 public:
  CaseStream(const VerifyOptions& o, RecordingExecutor& exec);
  ~CaseStream();  // stops the workers (each finishes the case it runs)
  CaseStream(const CaseStream&) = delete;
  CaseStream& operator=(const CaseStream&) = delete;
  struct Next {
    rc::Shrinkable<Case> case_;         // to shrink from, if it fails
    std::optional<CaseOutcome> outcome;  // set where it ran ahead
  };
  // Case i (0-based; called for 0, 1, 2, ... in turn). Where it ran ahead
  // and the harness failed it (no thread or memory), the workers are stopped
  // first, so that the caller may run it again on the executor.
  Next next(size_t i);
  // The cases run ahead of the one just taken did not run as far as the
  // run is concerned (it failed, or the run ends there). A later next()
  // runs them again, so that the cases are those one at a time would run.
  void drop_ahead();

 private:
  struct Slot {
    rc::Shrinkable<Case> case_;
    size_t weight = 0;     // case_weight: the tail runs the heaviest first
    bool started = false;  // a worker took it (or has its outcome)
    std::optional<CaseOutcome> outcome;
    std::exception_ptr error;  // what the executor threw instead
  };
  rc::Shrinkable<Case> draw(size_t i);
  void draw_to(size_t end);  // draws every case below `end` not drawn yet, in order
  // The case a free worker runs next, if one may run now: the first not
  // started, or the heaviest not started where it weighs at least the
  // others not started per worker (parallel()) or the run is in its last
  // kTail cases, so that a run does not end on one worker's large case while
  // the others idle.
  std::optional<size_t> pick();
  void started(size_t k);  // a worker takes case k
  void unstart_all();      // drop_ahead: every case kept drawn waits again
  void work(size_t worker);
  void stop_workers();
  const VerifyOptions& o_;
  RecordingExecutor& exec_;
  rc::Random base_;
  rc::Gen<Case> gen_;
  // The workers' state, under m_.
  std::mutex m_;
  std::condition_variable cv_;
  std::map<size_t, Slot> ahead_;  // drawn and not taken yet, by case index
  size_t drawn_ = 0;              // cases drawn: the index of the next one to draw
  size_t first_free_ = 0;         // every case below it has started (taken_ <= first_free_ <= drawn_)
  size_t taken_ = 0;              // cases taken by next()
  // The cases drawn and not started, heaviest first (then by index), and
  // their weights' sum.
  std::set<std::pair<size_t, size_t>, std::greater<>> waiting_;  // (weight, ~index)
  size_t waiting_weight_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace collcheck
