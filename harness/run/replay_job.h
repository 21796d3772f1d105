// collcheck replay as a job: a scenario file (YAML or JSON) read within its
// input limits, run in the session's world to its diagnosis, and judged
// against the scenario's expectation on the root. What it says goes to the
// events: the header, the diagnosis (and a finding event per diagnosis), the
// per-rank timeline, and the expectation's verdict.
#pragma once

#include <functional>
#include <string>

#include "harness/report/events.h"
#include "harness/report/report.h"
#include "harness/session/session.h"

namespace collcheck {

struct ReplayJob {
  std::string file;
  std::string mode;      // guarded, unguarded, or "" (the scenario's)
  std::string dump_dir;  // "": dumps to a temporary directory, removed at the end
  std::string max_input_bytes = "16M";
  std::string max_steps = "200000";
};

// The verdict on the root: the command's reports; returns the exit code.
using ReplayFinish = std::function<int(const Report& rep, int code)>;

// Reads, checks, runs and judges the replay. Throws UsageError for a file or
// flag that cannot be honoured (a dump directory refused, a program too large
// for this machine's memory). Returns the exit code every process agrees on:
// 0 the expectation holds, 1 it does not, kExitSkipped (the implementation
// cannot run here), a harness error (the run failed with no diagnosis), or
// `finish`'s code.
int run_replay_job(const ReplayJob& job, const Session& session, Events& ev, const ReplayFinish& finish);

}  // namespace collcheck
