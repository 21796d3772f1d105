// A run's flight-recorder dumps and diagnoses as a timeline to look at
// (report.h's TimelineRun; the trace format draws it).
#pragma once

#include <string>
#include <vector>

#include "harness/check/diagnosis.h"
#include "harness/history/flight_recorder.h"
#include "harness/report/report.h"

namespace collcheck {

// One track per rank and communicator (the world's collectives, its
// point-to-point calls, each process group's), in rank order. Slices: each
// call that started (to its completion, or to the dump if it never
// completed), a call queued but never started, an async call's time from
// completion to its wait (to the dump when never waited), each transfer this
// rank recorded, the transfer it is blocked on at the dump, and the times its
// process did not run. Marks: each diagnosis, at `diagnosed_at` (seconds from
// the start; below 0: at the last dump), on the whole run and on each rank
// it names. At most `max_transfers` transfers per track are drawn (the
// latest); the run's marks say how many were left out.
TimelineRun timeline_of(std::string name, const std::vector<RankDump>& dumps, const std::vector<Diagnosis>& diagnoses,
                        double diagnosed_at, size_t max_transfers = 2000);

}  // namespace collcheck
