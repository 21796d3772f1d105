// collcheck soak as a job: the soak as the user asked for it, checked and
// turned into its options (soak.h) in the session's world: the plan (the
// default or a YAML file within its limits), the duration, the seed (a
// resumed soak's from its results file, else --seed, the plan's or a fresh
// one; rank 0's on every process), the results file (a new one per run by
// default), how it reports, and the memory its largest unit needs.
#pragma once

#include <string>

#include "harness/session/session.h"
#include "harness/soak/soak.h"

namespace collcheck {

struct SoakJob {
  std::string plan;             // "": the default plan
  double duration = 600;        // seconds (a resumed soak counts the time already run)
  std::string seed;             // "": the plan's, else random (printed)
  std::string results;          // "": collcheck-soak-<UTC date and time>-<seed>.jsonl
  bool resume = false;          // continue the soak of `results`
  std::string progress = "auto";  // on stderr: auto (a bar on a terminal, lines elsewhere), bar, lines, off
  double progress_interval = 60;  // lines: one this often (seconds)
  double metrics_interval = 15;   // pushes and textfile writes this often
  std::string max_input_bytes = "1M";  // the largest plan file read
  std::string version;          // collcheck's, in the results file
};

// The job checked (UsageError names the flag) and planned. Fills
// job.results when it was not given.
SoakOptions plan_soak(SoakJob& job, const Session& session);

}  // namespace collcheck
