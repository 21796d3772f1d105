// The fault table: every nemesis injected into the training-step scenario
// (fault_table_scenario), in guarded and unguarded mode, each row replayed
// and its diagnosis compared with the fault it injected. `collcheck faults`
// prints it; `collcheck gate` runs it after verify.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/report/events.h"
#include "harness/report/report.h"
#include "harness/run/scenario_runner.h"
#include "harness/session/session.h"

namespace collcheck {

struct FaultTableOptions {
  int ranks = 4;
  std::string impl = "ring";
  bool guarded = true, unguarded = true;  // the modes to run
  // Where a row not diagnosed as injected keeps its dumps, one folder per row
  // ("": every row's dumps are removed).
  std::string keep_dumps;
  // Rows that start after it says so are not run (a budget); threads only.
  std::function<bool()> should_stop;
  bool root = true;  // this process judges the rows (in the MPI world every process replays them)
};

struct FaultRow {
  std::string fault;
  bool guarded = true;
  bool run = true;  // false: the budget ran out before it
  bool ok = false;  // diagnosed as injected
  double diagnosed_at = 0, seconds = 0;
  std::string diagnosis;  // the first finding, as text ("none")
  std::string why;        // why it is not as injected, and where its dumps are
  double deadline_s = 0;
  bool own_deadline = false;  // the fault's own delays needed a longer deadline than the scenario's
  TimelineRun timeline;
};

// Replays a scenario in the world this process runs in.
using ScenarioReplayer = std::function<ReplayResult(const Scenario&, const ReplayOptions&)>;

// Every row, in the nemesis table's order; `each` sees each row as it ends
// (on the root only). Throws ScenarioError for an implementation that cannot
// run in a scenario.
std::vector<FaultRow> run_fault_table(const FaultTableOptions& o, const ScenarioReplayer& replay,
                                      const std::function<void(const FaultRow&)>& each);

// The rows as the verdicts of a report (one per fault and mode, each with
// its timeline).
void add_fault_rows(Report& rep, const std::vector<FaultRow>& rows);

// The fault table as a job in the session's world: the table printed row by
// row to `ev` (on the root), its verdicts in `rep`. Returns the exit code: 0
// every row diagnosed as injected, 1 one was not, kExitHarnessError rows not
// run (the budget ran out before them).
int run_fault_table_job(const FaultTableOptions& o, Report& rep, const Session& session, Events& ev);

}  // namespace collcheck
