// The soak's "algorithms" workload (issue 31, item 5): every algorithm a peer
// library offers, verified in turn. A unit draws one (Open MPI's coll/tuned
// allreduce algorithm N under mpirun -np k, or one Gloo algorithm with up to
// k ranks as threads) and runs `collcheck verify` on it as a child process,
// with the unit's seed and a deadline: an Open MPI algorithm is fixed for a
// process's life (coll/tuned reads it once), and a Gloo context's epoll loop
// must not outlive its unit. The child's verdict, minimal case and replay line
// become the unit's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace collcheck {

// "mpi:0" .. "mpi:6" (0: the default decision) where mpirun is on the PATH,
// then "gloo:<algorithm>" for each of Gloo's.
std::vector<std::string> default_algorithm_peers();
// Why `spec` is not one of those forms, or "" when it is.
std::string check_algorithm_peer(const std::string& spec);

struct AlgorithmUnit {
  std::string peer;      // as default_algorithm_peers() names it
  int ranks = 2;         // mpirun -np, or --max-ranks for Gloo
  size_t cases = 300;
  uint64_t seed = 0;
  double call_timeout_s = 10;
  double deadline_s = 600;  // the whole child: past it, the unit is a hang
};

struct AlgorithmOutcome {
  bool ok = false;
  bool interrupted = false;    // should_stop ended the child: no verdict
  bool harness_error = false;  // the child gave no verdict (exit 2, 3, a signal, the deadline)
  int exit_code = -1;
  size_t cases = 0;
  std::string property;        // the failed property, or "hang"/"no verdict"
  std::string minimal;         // the minimal case's line
  std::string command;         // what ran
  std::string replay;          // the child's replay line
  std::string detail;          // the child's failure report, or its last lines
  std::vector<std::pair<std::string, size_t>> deviations;  // documented deviations it counted
};

// Runs the unit's child; `self` is the collcheck binary. `should_stop` is
// polled every 0.2 s: when it turns true the child's process group is ended.
AlgorithmOutcome run_algorithm_unit(const std::string& self, const AlgorithmUnit& u,
                                    const std::function<bool()>& should_stop);

}  // namespace collcheck
