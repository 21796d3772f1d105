// `collcheck sweep`: the nccl-tests style table over sizes x dtypes x ops x
// algorithms, each row timed and (with -c 1) checked against the oracle.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/model/data.h"
#include "harness/report/events.h"
#include "impl/dtype.h"
#include "impl/semantics.h"

namespace collcheck {

struct SweepOptions {
  // Defaults sized for ranks as threads on a small CPU machine (nccl-tests'
  // 32M default targets GPUs).
  size_t min_bytes = 1 << 10;
  size_t max_bytes = 256 << 10;
  double factor = 16;
  std::optional<size_t> count;  // elements; overrides -b/-e when set
  std::vector<DType> dtypes = {DType::Float32};
  std::vector<RedOp> ops = {RedOp::Sum};
  std::vector<std::string> algos = {"ring"};
  // Peers timed on the same rows in the same run (gloo:<algo> with ranks as
  // threads, mpi under mpirun), each --algo's busbw then read against theirs.
  std::vector<std::string> against;
  int iters = 20;
  // Timed repetitions of `iters` calls each: one busbw sample each (the gate
  // compares rows over them); the row's time is their mean.
  int reps = 1;
  int warmup = 5;
  bool check = true;
  int ranks = 4;
  bool inplace = false;
  uint64_t seed = 1;
  DataClass data = DataClass::Mixed;
  double scalar = 3;
  std::chrono::milliseconds timeout{60000};
  bool memcpy_peer = true;
  // Nodes of this many consecutive ranks (0: the world's own: threads one,
  // MPI its hosts), which the hierarchical algorithm follows.
  int ranks_per_node = 0;
  // The slow-link nemesis on every edge between two nodes (edges: inter-node):
  // added latency per transfer, and a bandwidth cap (0: none). Off when both 0.
  double inter_latency_us = 0;
  double inter_bandwidth_mbps = 0;
};

// The alpha-beta model of an all-reduce's inter-node cost: the transfers over
// slow links on its critical path, each alpha + bytes * beta. ring: 2(p-1)
// steps of N/p bytes, each crossing a node boundary somewhere (the ring
// advances in lockstep) when there are two nodes or more; hierarchical: 2(L-1)
// steps of N/L bytes among the L leaders. nullopt for an algorithm it does not
// model (or one node: nothing crosses).
std::optional<double> alpha_beta_seconds(std::string_view algo, int p, int nodes, size_t bytes, double alpha_s,
                                         double bytes_per_s);

struct SweepRow {
  size_t bytes = 0;
  size_t count = 0;
  DType dtype{};
  RedOp op{};
  std::string algo;
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  std::vector<double> busbw_samples;  // one per repetition, GB/s
  // With --reps: a memcpy of the row's bytes in this process right after each
  // repetition, GB/s: the peer each sample is read against (a loaded machine
  // slows both alike).
  std::vector<double> memcpy_samples;
  size_t wrong = 0;
  double max_err_units = 0;
  std::string error;  // first problem found, if any
  bool peer = false;  // one of --against
  // Elements (over every rank) whose result differs from NCCL's as the
  // implementation's documented deviation allows (Implementation::deviation).
  size_t deviant = 0;
  std::string deviation;
  std::string skipped;  // why the implementation cannot reduce this dtype and op ("": it ran)
};

struct SweepResult {
  std::vector<SweepRow> rows;
  size_t total_wrong = 0;
  int exit_code() const { return total_wrong == 0 ? 0 : 1; }
};

struct OutputCheck {
  size_t wrong = 0;           // wrong elements (oracle), differing elements, modified inputs
  double max_err_units = 0;
  std::string first_problem;  // "" when everything is right
};

// Checks the outputs of one all-reduce call: rank 0's result against the oracle
// (built from `pristine`, the inputs as generated), every other rank bitwise
// against rank 0, and, for out-of-place calls, that each rank's send buffer
// (`inputs_after`, empty for in-place) still equals its pristine input.
OutputCheck check_outputs(const Reduction& red, std::span<const void* const> pristine,
                          std::span<const void* const> outputs, std::span<const void* const> inputs_after,
                          size_t count);

// The rows as JSON for tools: nccl-tests' field names where they fit (size,
// count, type, redop, root, and per placement time in us, algbw, busbw,
// wrong), with collcheck's own (algo, ranks, busbw_samples).
// sweep_row_json: one row, as the file and the row events hold it.
nlohmann::json sweep_row_json(const SweepOptions& o, const SweepRow& x);

class Session;

// --json FILE as a sink of the run's row events (the root's): the header
// (version, world, ranks, iterations, seed) and every row, written atomically
// when the stream closes; a file that cannot be written is the close's error.
std::shared_ptr<EventSink> sweep_json_sink(const std::string& path, const SweepOptions& o, const Session& session,
                                           const std::string& version);

// Runs the sweep in the session's world (threads: a world of o.ranks made for
// it; MPI: every process a rank). The root emits the table as text events and
// each row as a row event as rows complete; the other processes emit nothing.
SweepResult run_sweep(const SweepOptions& o, Events& ev, const Session& session);

// Element counts nccl-tests would use for [min_bytes, max_bytes] by `factor`.
std::vector<size_t> sweep_counts(const SweepOptions& o, DType t);

}  // namespace collcheck
