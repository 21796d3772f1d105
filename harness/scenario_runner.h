// Runs a scenario in the thread world: applies its faults (faults/), gives
// every rank a communicator with a flight recorder, executes each rank's
// program, checks every waited result against the oracle, and diagnoses.
//
// Guarded mode checks fingerprints before each call (harness/guard.h).
// Unguarded mode runs as production would until the deadline fires, writes
// each rank's flight-recorder dump, and diagnoses from those files alone, as
// `collcheck analyze` does.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/diagnosis.h"
#include "harness/scenario.h"

namespace collcheck {

struct ReplayOptions {
  std::optional<bool> guarded;  // overrides the scenario's mode
  // Where each rank's flight-recorder dump goes. Unguarded mode always dumps
  // ("" = a fresh temporary directory); guarded mode dumps when this is set.
  std::string dump_dir;
};

struct ReplayResult {
  std::vector<Diagnosis> diagnoses;
  std::vector<RankDump> dumps;
  bool guarded = true;
  bool hung = false;             // some rank did not return within the run's limit
  double seconds = 0;            // the whole run
  double time_to_diagnosis = -1; // guarded: when the guard fired; unguarded: when the analysis was done
  double first_failure = -1;     // when the first rank failed (the watchdog, in unguarded mode)
  std::string dump_dir;          // where dumps were written (unguarded)
  size_t results_checked = 0;    // waited calls compared with the oracle
};

// Throws ScenarioError for a scenario that cannot run (bad faults, an
// implementation that does not exist, the MPI world outside mpirun).
ReplayResult replay_scenario(const Scenario& s, const ReplayOptions& o = {});

class MpiWorld;
// The same run in the MPI world (every process calls it; s.ranks must equal
// the number of processes). Rank 0's result holds the diagnosis; the other
// ranks' results are not meaningful. Guarded mode exchanges fingerprints
// before each call; unguarded mode gathers every rank's dump to rank 0 and
// diagnoses from those files alone.
ReplayResult replay_scenario_mpi(const Scenario& s, const ReplayOptions& o, MpiWorld& world);

// Whether `r` matches the expectation `e` (diagnosis kind, and the ranks, seq,
// edge and fields it names); `why` says what differs.
bool expectation_holds(const ExpectSpec& e, const ReplayResult& r, std::string* why);

}  // namespace collcheck
