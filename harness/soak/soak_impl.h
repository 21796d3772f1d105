// The soak's one class, shared by soak.cc (the run, the results file,
// serving the other processes), soak_units.cc (one unit of each workload)
// and soak_output.cc (what the user sees: the header, progress, summary,
// metrics). Internal to harness/soak.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "harness/soak/soak.h"
#include "harness/metrics/metrics.h"
#include "harness/model/data.h"
#include "harness/peers/peer_registry.h"
#include "harness/run/scenario_runner.h"
#include "harness/run/sweep.h"
#include "harness/soak/algorithms.h"
#include "harness/soak/results_file.h"
#include "harness/session/session.h"
#include "properties/detection.h"
#include "properties/executor.h"
#include "properties/verify.h"

namespace collcheck::soak_detail {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// The stop signal that arrived (0: none); the second one ends the process.
extern std::atomic<int> g_signal;
extern "C" void on_stop_signal(int sig);

// What one unit is, drawn by the root from the master seed and the unit's index.
struct Unit {
  size_t index = 0;
  std::string workload;
  size_t impl = 0;
  uint64_t seed = 0;
};

inline bool is_reference(const std::string& impl) { return impl == "ring" || impl == "tree" || impl == "dbtree"; }

// One implementation of the plan, ready to run.
struct Lane {
  PlanImpl spec;
  RunConfig cfg;
  CaseSpace space;
  std::unique_ptr<CaseExecutor> exec;  // the thread world's (made before any thread starts)
  std::string note;                    // what this lane leaves out, said once in the header
};

inline std::string shape_of(const Case& c) {
  return fmt::format("p={} count={} {}", c.p, c.count, c.inplace ? "in-place" : "out-of-place");
}

class Soak {
 public:
  Soak(const SoakOptions& o, Events& ev, const Session& session) : o_(o), ev_(ev), session_(session), mpi_(session.mpi()) {}
  Soak(const Soak&) = delete;
  Soak& operator=(const Soak&) = delete;

  void prepare_lanes(bool executors);

  uint64_t memory_needed() const;

  SoakResult run();

  // Every process but the root's: what rank 0 says, until it says stop.
  int serve(World& world);

 private:
  static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

  static void install_signals();

  // ---- the results file (results_file.h: the lock, one world, checked writes)
  void open_results();

  void restore();

  // A full disk stops the soak (exit 5), never a PASS over a cut file.
  // A line of the results file; a unit's is also a unit event, with the
  // calls it timed (for the metrics sink).
  void append(const json& j, json calls = nullptr);
  std::string write_error() const { return results_ ? results_->error() : std::string(); }

  // ---- totals and groups: one place, for live units and for --resume
  void count_unit(const json& j);

  // ---- one unit
  bool run_unit(const Unit& u, double t);

  bool verify_unit(Lane& l, const Unit& u, json& j);

  json faults_unit(const Unit& u, json& j);  // returns rank 0's timed calls

  SweepOptions perf_options(const Lane& l, const json& j) const;

  void perf_unit(Lane& l, const Unit& u, json& j);

  void algorithms_unit(const Unit& u, json& j);

  static std::string self_exe();

  // ---- what the user sees
  void print_header();

  std::string progress_line(const Unit& u) const;

  json summary_json(const SoakResult& r) const;

  void print_summary(const SoakResult& r);

  void export_metrics();

 public:
  std::vector<Lane> lanes_;

 private:
  const SoakOptions& o_;
  Events& ev_;  // what the user sees: text, unit and progress events
  const Session& session_;
  MpiWorld* mpi_;  // session_.mpi(): nullptr for threads
  Clock::time_point t0_ = Clock::now();  // when this part of the soak began
  std::unique_ptr<ResultsFile> results_;  // locked while this soak runs
  SoakTotals totals_;
  size_t next_index_ = 0;
  double perf_s_per_byte_ = 0;  // the slowest sweep row so far
  std::vector<std::string> algorithm_peers_;  // what algorithms units draw from
  double remaining_s_ = 0;      // of the duration, when the unit started
  double elapsed_before_ = 0;
};

}  // namespace collcheck::soak_detail
