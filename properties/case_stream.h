// The random cases of a verify run, in the order the seed draws them, each
// with its outcome once it has run. One at a time, or, where the executor
// runs cases side by side (CaseExecutor::parallel() > 1: verify --jobs), run
// ahead in batches; the outcomes are still taken in the order one at a time
// would take them, and the cases after a batch's first failure are dropped
// as if never run, so that the run's output is the same for any --jobs.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <deque>
#include <optional>
#include <utility>

#include "properties/earlier_cases.h"
#include "properties/verify.h"

namespace collcheck {

class CaseStream {
 public:
  CaseStream(const VerifyOptions& o, RecordingExecutor& exec);
  struct Next {
    rc::Shrinkable<Case> case_;         // to shrink from, if it fails
    std::optional<CaseOutcome> outcome;  // set where it ran ahead
  };
  // Case i (0-based; called for 0, 1, 2, ... in turn).
  Next next(size_t i);
  // The cases run ahead of the one just taken did not run as far as the
  // run is concerned (it failed, or the run ends there).
  void drop_ahead();

 private:
  rc::Shrinkable<Case> draw(size_t i);
  const VerifyOptions& o_;
  RecordingExecutor& exec_;
  rc::Random base_;
  rc::Gen<Case> gen_;
  std::deque<std::pair<rc::Shrinkable<Case>, CaseOutcome>> ahead_;
  size_t batch_;
};

}  // namespace collcheck
