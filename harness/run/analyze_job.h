// collcheck analyze as a job: the diagnosis of flight-recorder dumps alone,
// collcheck's own (rank-<r>.json) or PyTorch's Flight Recorder, and for the
// latter a scenario that reproduces them. What it finds goes to the events;
// the command line only parses the flags and writes the reports.
#pragma once

#include <string>

#include "harness/model/exit_codes.h"
#include "harness/report/events.h"
#include "harness/report/report.h"

namespace collcheck {


struct AnalyzeJob {
  std::string dir;
  int world_size = 0;         // PyTorch dumps: the job's size when the dumps do not hold it (0: from the dumps)
  std::string emit_scenario;  // PyTorch dumps: write a scenario that reproduces them here ("": not written)
  size_t emit_max_count = 65536;  // the emitted scenario's largest call (0: the dumps' sizes)
};

// Reads and diagnoses the dumps; fills `rep`; returns the exit code: 0 clean,
// 1 a diagnosis, kExitUndecided. Throws UsageError for dumps or flags that
// cannot be read or honoured.
int run_analyze_job(const AnalyzeJob& job, Events& ev, Report& rep);

}  // namespace collcheck
