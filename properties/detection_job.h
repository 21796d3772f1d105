// `collcheck faults --random`: the detection property as a job. Random clean
// scenarios, each with a random fault (or none), replayed in the session's
// world (every MPI process draws the same cases from the seed), each
// diagnosis compared with the fault injected. It says what it does as events:
// text, a case event and progress per case, a finding per case missed (with
// the case as a scenario to replay), and the tally by fault at the end.
#pragma once

#include <cstdint>
#include <string>

#include "harness/report/events.h"
#include "harness/report/report.h"
#include "harness/session/session.h"

namespace collcheck {

struct DetectionJob {
  size_t cases = 0;
  int ranks = 4;
  uint64_t seed = 0;
  std::string keep_dumps;  // a missed case's dumps are kept in <keep_dumps>/case-<n> ("": not kept)
};

// Returns the run's report (one verdict per case; the root's), and `code`:
// 1 when a case was missed, else 0, before the processes agree on it.
Report run_detection_job(const DetectionJob& job, const Session& session, Events& ev, int& code);

}  // namespace collcheck
