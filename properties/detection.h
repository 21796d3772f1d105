// The detection property (the fault-injection issue): generate a random clean
// scenario, inject a random fault with random parameters, replay it, and
// compare from outside: the diagnosis must name the injected fault's class and
// the right ranks, call or edge; a clean scenario must produce no diagnosis;
// and no run may take longer than its deadline plus a small margin.
#pragma once

#include <rapidcheck.h>

#include <functional>
#include <optional>
#include <string>

#include "harness/run/scenario_runner.h"

namespace collcheck {

struct DetectionCase {
  Scenario clean;
  std::optional<FaultSpec> fault;
  bool guarded = true;
  Scenario scenario() const;  // clean + the fault + the expectation
};

rc::Gen<DetectionCase> gen_detection_case(int min_ranks, int max_ranks);

struct DetectionOutcome {
  bool ok = false;
  std::string why;
  double seconds = 0;
  double limit_s = 0;   // the longest this run may take
  double margin_s = 0;  // seconds beyond the extra time its fault allows (a stalled rank: one deadline), else 0
  bool slow = false;      // the diagnosis was right but the run outlasted its limit
  std::string slow_once;  // set when a first run was slow and this outcome is its rerun's: why it was slow
  ReplayResult result;
};

// Replays with `replay` (default: the thread world's replay_scenario). A run
// that is right but slower than its limit is run once more (a loaded machine);
// slow twice is a failure. Each MPI process times its own run, and a rerun
// one process decided alone would leave the others waiting for it: an MPI
// replay passes `any_process` (Session::any_process: true on every process
// when it is true on one), or rerun_if_slow = false. The run's dumps are
// removed, unless keep_failed_dumps and the outcome is not ok
// (result.dump_dir names them).
DetectionOutcome check_detection(const DetectionCase& c,
                                 const std::function<ReplayResult(const Scenario&)>& replay = {},
                                 bool rerun_if_slow = true, bool keep_failed_dumps = false,
                                 const std::function<bool(bool)>& any_process = {});

// The scenario `collcheck faults` runs each nemesis against.
Scenario fault_table_scenario(int ranks, const std::string& impl);
// One deterministic instance of each nemesis for that scenario.
FaultSpec fault_table_instance(const Scenario& s, const std::string& nemesis);

}  // namespace collcheck
