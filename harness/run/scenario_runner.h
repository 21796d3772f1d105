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

#include "harness/check/diagnosis.h"
#include "harness/model/scenario.h"
#include "harness/world/world.h"

namespace collcheck {

struct ReplayOptions {
  std::optional<bool> guarded;  // overrides the scenario's mode
  // Where each rank's flight-recorder dump goes. Unguarded mode always dumps
  // ("" = a fresh temporary directory); guarded mode dumps when this is set.
  std::string dump_dir;
  // The waited outputs each rank keeps to check at the end of the run; past
  // it, the oldest are checked and released as the run goes. 0: 128 MiB over
  // the world's ranks, 1 MiB at least.
  uint64_t kept_output_bytes = 0;
  // How the replay's world is made when none is given (Session::worlds()).
  WorldFactory make_world = thread_worlds();
};

struct ReplayResult {
  std::vector<Diagnosis> diagnoses;
  std::vector<RankDump> dumps;
  bool guarded = true;
  bool hung = false;             // some rank did not return within the run's limit
  double seconds = 0;            // the whole run (in the world's time)
  bool virtual_time = false;     // the simulated world's: the same on every host
  double time_to_diagnosis = -1; // guarded: when the guard fired; unguarded: when the analysis was done
  double first_failure = -1;     // when the first rank failed (the watchdog, in unguarded mode)
  std::string dump_dir;          // where dumps were written (unguarded)
  std::string dump_error;        // why they could not all be written ("" when they were)
  size_t results_checked = 0;    // waited calls compared with the oracle
  // Some rank's body failed and no diagnosis names why (the harness could not
  // allocate a call's buffers, say): the rank failures. Not a verdict, and
  // never a clean run.
  std::string unexplained;
  // One line per link fault that never fired, saying why (faults/nemesis.h).
  std::vector<std::string> unfired;
  // Unguarded mode: what the run looked like from outside, as production
  // would have shown it: a hang until the deadline (with the watchdog's
  // message), an error, or corrupted output; empty in guarded mode.
  std::string symptom;
};

// Runs the scenario in `world`: every process of the world calls it, and
// s.ranks must equal the world's size. The root's result holds the diagnosis;
// another process's result is not meaningful. Guarded mode checks every call's
// fingerprints first (World::call_guard); unguarded mode gathers every rank's
// dump to the root and diagnoses from those files alone. Throws ScenarioError
// for a scenario that cannot run (bad faults, an implementation that does not
// exist or not in this world, an MPI scenario outside mpirun).
// The run's limit in seconds: every call may take its deadline twice (in
// guarded mode a rank may first wait a deadline for the others'
// fingerprints), plus the sleeps; a run past it is hung.
double replay_limit_s(const Scenario& s);

ReplayResult replay_scenario(const Scenario& s, const ReplayOptions& o, World& world);
// The same in a thread world of s.ranks ranks.
ReplayResult replay_scenario(const Scenario& s, const ReplayOptions& o = {});
// A scenario in the session's world: under MPI every process is a rank of the
// MPI world; otherwise a world from the session's factory.
class Session;
ReplayResult replay_in_session(const Scenario& s, const ReplayOptions& o, const Session& session);

// The memory a replay of `s` needs in one process holding `ranks` of its
// ranks (all of them in the thread world, one under MPI), at the most: each
// rank holds the current call's input and output, the async calls' buffers
// until their wait (to the end for a call waited at the end or never), the
// waited outputs up to its kept budget (ReplayOptions::kept_output_bytes; 0:
// the default), and the oracle's inputs for one check (p buffers for a small
// call, p shares of one for a large one). Saturates rather than wraps.
uint64_t replay_memory_needed(const Scenario& s, int ranks, uint64_t kept_output_bytes = 0);

// Whether `r` matches the expectation `e` (diagnosis kind, and the ranks, seq,
// edge and fields it names); `why` says what differs.
bool expectation_holds(const ExpectSpec& e, const ReplayResult& r, std::string* why);
// Whether one diagnosis is what `e` describes (kind, ranks, call, group, edge, fields).
bool diagnosis_matches(const ExpectSpec& e, const Diagnosis& d, std::string* why);
// The scenario's expectations: `expect` is the first finding (none: a clean
// run), and each of `also_expect` is some finding of the run.
bool expectations_hold(const Scenario& s, const ReplayResult& r, std::string* why);

}  // namespace collcheck
