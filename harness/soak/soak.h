// `collcheck soak` (issue 14): a long unattended run that mixes the plan's
// workloads (verify cases, fault scenarios, checked sweep rows) over its
// implementations until its duration is spent, never stopping at a failure.
//
// - Every unit of work is one line of JSON in the results file, written and
//   flushed as it ends: a soak killed by its scheduler loses at most the unit
//   in flight, and --resume continues from the file (same seed, same plan,
//   the next unit).
// - Failures are grouped by signature (workload, implementation, property or
//   diagnosis, dtype/op, the minimal case's shape): a bug that fires 10,000
//   times is one line with a count, its first replay line, its last unit.
// - SIGINT or SIGTERM: the unit in flight ends (each is bounded by its
//   deadlines), the summary is written, and the exit code is the verdict so
//   far; a second signal ends the process at once.
// - In the MPI world rank 0 draws and judges every unit and tells the other
//   processes what to run; it alone writes results and metrics.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "harness/model/atomic_file.h"
#include "harness/report/events.h"
#include "harness/report/report.h"
#include "harness/soak/plan.h"
#include "harness/world/world.h"

namespace collcheck {

class Session;

class Metrics;
class World;

struct SoakOptions {
  Plan plan;
  uint64_t seed = 0;
  double duration_s = 600;
  std::string results_path = "collcheck-soak.jsonl";
  bool resume = false;
  Metrics* metrics = nullptr;        // where units are counted (root only), may be null
  double metrics_interval_s = 15;    // push and textfile this often
  std::string metrics_textfile;      // "" = none
  bool push = false;                 // metrics->push() every interval and at the end
  std::string launcher;              // "mpirun -np 4 " in replay lines, "" for threads
  std::string run_flags;             // " --world mpi" in replay lines
  std::string version;               // collcheck's, in the results header
  // --world sim: how the verify and fault units of the reference algorithms
  // make their worlds (the simulated world's factory); empty: threads. Perf
  // rows, the algorithms workload and plugins run as threads.
  WorldFactory sim_worlds;
};

struct FailureGroup {
  std::string signature;
  std::string workload, impl, property;
  size_t count = 0;
  size_t first_unit = 0, last_unit = 0;
  std::string replay;  // the first failure's replay line, or its scenario file
  std::string detail;  // the first failure's report
};

struct SoakTotals {
  size_t units = 0;
  std::map<std::string, size_t> by_workload;        // units
  std::map<std::string, size_t> cases_by_workload;  // verify cases, scenarios, rows
  struct Row {
    size_t units = 0, cases = 0, failed = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> by_workload_impl;
  size_t failed_units = 0;
  std::map<std::string, FailureGroup> groups;  // by signature
  double elapsed_s = 0;
};

struct SoakResult {
  SoakTotals totals;
  std::string stop_reason;  // "duration", "SIGINT", "SIGTERM", "world lost", "results unwritable"
  // 1 when a unit failed or the world was lost; else 128 + the signal for a
  // soak cut short by SIGINT (130) or SIGTERM (143): a cut run is never a pass;
  // else 0 (the duration ran out with no failure).
  int exit_code() const {
    if (totals.failed_units > 0 || stop_reason == "world lost") return 1;
    if (stop_reason == "results unwritable") return kExitOutputLost;
    if (stop_reason == "SIGINT") return 130;
    if (stop_reason == "SIGTERM") return 143;
    return 0;
  }
};

// --resume: the seed and plan of the soak a results file records (its start
// line); throws PlanError when the file is not one.
struct SoakHeader {
  uint64_t seed = 0;
  Plan plan;
};
SoakHeader read_soak_header(const std::string& results_path);

// What the largest unit of the plan needs in this process (the up-front
// memory check): its largest verify case, or 4 x ranks x its largest sweep row.
// Each runs in the session's world: threads, or the MPI world (every process
// a rank; the root draws the units and the others serve them).
uint64_t soak_memory_needed(const SoakOptions& o, const Session& session);
// Throws PlanError (bad plan or results file: exit 2) before any work.
SoakResult run_soak(const SoakOptions& o, Events& ev, const Session& session);
// The loop of every MPI process but the root's: runs what rank 0 says until it
// says stop; returns the exit code it sends (1 when it goes silent).
int serve_soak(const SoakOptions& o, Events& ev, const Session& session);

Report soak_report(const SoakOptions& o, const SoakResult& r);

}  // namespace collcheck
