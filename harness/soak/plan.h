// The plan of a soak (issue 14): which implementations run, against which
// peers, the workloads mixed by weight (verify cases, fault scenarios,
// checked sweep rows), their dtypes, ops, sizes and world sizes. A YAML file,
// or the default plan when none is given; a bad plan is "file:line: field:
// what is wrong; allowed: ...", as scenarios are.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "impl/dtype.h"
#include "impl/semantics.h"

namespace collcheck {

class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PlanImpl {
  std::string impl;     // as --impl takes it: ring, gloo:ring, mpi, nccl, plugin:./x.so
  std::string against;  // as --against takes it; "" = the implementation's default peers
  int line = 0;
};

struct Plan {
  std::string file = "(default plan)";
  std::optional<uint64_t> seed;  // the master seed; drawn and printed when absent
  std::vector<PlanImpl> impls{{"ring", "", 0}, {"tree", "", 0}, {"dbtree", "", 0}};
  std::vector<DType> dtypes{kAllDTypes.begin(), kAllDTypes.end()};
  std::vector<RedOp> ops{kAllOps.begin(), kAllOps.end()};
  // World sizes (the thread world; under mpirun every unit uses the processes).
  int min_ranks = 1, max_ranks = 8;
  double timeout_s = 10;  // per call: what a call may take before it is a hang
  struct Verify {
    double weight = 6;
    size_t cases = 10;  // cases per unit (one seed)
    size_t max_count = 4096;
    size_t large_bytes = size_t{1} << 20;
  } verify;
  struct Faults {
    double weight = 3;
  } faults;
  struct Perf {
    double weight = 1;
    size_t min_bytes = size_t{1} << 10, max_bytes = size_t{64} << 20;  // powers of two in between
    std::vector<DType> dtypes{DType::Float32, DType::BFloat16};
    int iters = 5, warmup = 1;
  } perf;
  // Every algorithm of the peer libraries (harness/soak/algorithms.h), one
  // per unit, each in a child `collcheck verify` (the thread world only).
  struct Algorithms {
    double weight = 0;
    size_t cases = 300;              // cases per unit
    std::vector<std::string> peers;  // "mpi:N", "gloo:<algorithm>"; empty = every one (default_algorithm_peers)
    double deadline_s = 600;         // a unit's child past this is a hang
  } algorithms;
};

struct PlanLimits {
  size_t max_bytes = size_t{1} << 20;
  int max_depth = 16;
};

Plan default_plan();
Plan load_plan(const std::string& path, const PlanLimits& limits = {});
Plan parse_plan(const std::string& text, const std::string& file, const PlanLimits& limits = {});
// The plan in effect, as a plan file would say it (the results file's header
// holds it, so that --resume runs the same plan).
std::string plan_to_yaml(const Plan& p);

}  // namespace collcheck
