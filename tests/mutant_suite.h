// What the mutant suites share (tests/mutants_test.cc: the thread world;
// tests/mutants_sim_test.cc: the simulated world): the mutants' names and
// paths, verify as the CLI runs it, and how small each one's minimal case
// must be.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "harness/world/world.h"
#include "properties/executor.h"
#include "properties/verify.h"
#include "tests/verify_quietly.h"

namespace mutant_suite {
using namespace collcheck;

inline std::vector<std::string> mutants() {
  std::vector<std::string> v;
  std::stringstream ss(MUTANTS);
  for (std::string m; std::getline(ss, m, ',');) v.push_back(m);
  return v;
}

inline std::string mutant_path(const std::string& m) { return std::string(MUTANT_DIR) + "/" + m + ".so"; }

// `collcheck verify --impl plugin:PATH --seed SEED`, in the given worlds
// (the thread world, unless `worlds` is given).
inline VerifyResult verify_plugin(const std::string& path, uint64_t seed, size_t cases = VerifyOptions{}.cases,
                                  bool isolate = false, WorldFactory worlds = {}) {
  ImplPtr impl = load_plugin(path);
  RunConfig cfg{impl, default_peers(*impl), std::chrono::milliseconds(10000), {}};
  if (worlds) cfg.make_world = std::move(worlds);
  auto exec_ptr = make_executor(std::move(cfg), isolate);
  CaseExecutor& exec = *exec_ptr;
  VerifyOptions o;  // the defaults of `collcheck verify`
  o.impl_spec = "plugin:" + path;
  o.seed = seed;
  o.cases = cases;
  // The shrink budget that decides is the default count of runs
  // (shrink_max_runs); its time limit is raised, so that a busy host (CI's two
  // cores running other suites beside this one) does not change the verdict:
  // chunk_index_3_bits's shrink, about 2,400 runs, once ran out of the 120 s
  // default there.
  o.shrink_budget_s = 900;
  return testutil::run_verify_quietly(o, exec);
}

struct MinimalLimit {
  int p = 4;
  size_t count = 16;
};
inline MinimalLimit minimal_limit(const std::string& m, DType t) {
  if (m == "chunk_index_3_bits") return {16, 16};  // needs p >= 9
  if (m == "large_message_tail") return {4, (size_t{128} << 10) / dtype_size(t) + 1};  // needs > 64 KiB
  // Needs one byte size in two dtypes: shrinking cannot cut both counts together.
  if (m == "plan_cache_keyed_on_bytes") return {4, 64};
  // A race: verify runs each shrink step of a flaky failure up to five
  // times, under the schedule that shows it most (verify_shrink.h); before,
  // one run a step let CI see seed 1 stop at count 142 and seed 2 at 17.
  // A step can still miss it five times: small enough to read, not minimal.
  if (m == "late_arrival_race") return {16, 64};
  // State across cases: whether a shrink step fails depends on what the
  // cases before it left on the shared rank threads, so shrinking stops
  // where that history stops reproducing it (the report says "depends on
  // earlier cases", not "steady").
  if (m == "thread_plan_cache") return {16, 4096};
  return {};
}


// Seeds 1, 2 and 3 (fewer under COLLCHECK_MUTANT_SEEDS), and the seed that
// COLLCHECK_SEED names (fresh: a random one), printed.
inline std::vector<uint64_t> mutant_seeds() {
  // Three seeds in the default build; the sanitizer builds (which check the
  // same code for memory and thread errors, ten times slower) run the first.
  std::vector<uint64_t> seeds{1, 2, 3};
  if (const char* env = std::getenv("COLLCHECK_MUTANT_SEEDS")) {
    seeds.resize(std::clamp<size_t>(std::strtoull(env, nullptr, 10), 1, 3));
    std::printf("[ note    ] COLLCHECK_MUTANT_SEEDS=%zu: seed(s) 1..%zu (the default build runs 3)\n", seeds.size(),
                seeds.size());
  }
  // COLLCHECK_SEED=N adds seed N (0x... too), COLLCHECK_SEED=fresh a random
  // one, printed: the claim "caught" must hold beyond the seeds above.
  if (const char* env = std::getenv("COLLCHECK_SEED")) {
    const uint64_t fresh = std::string(env) == "fresh" ? (uint64_t{std::random_device{}()} << 32) | std::random_device{}()
                                                       : std::strtoull(env, nullptr, 0);
    std::printf("[ note    ] COLLCHECK_SEED: also seed %#llx (replay: COLLCHECK_SEED=%#llx)\n",
                static_cast<unsigned long long>(fresh), static_cast<unsigned long long>(fresh));
    seeds.push_back(fresh);
  }
  return seeds;
}

}  // namespace mutant_suite
