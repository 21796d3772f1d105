// The point-to-point calls of collcheck's MPI interposer's dumps in an emitted
// scenario (torch_scenario.h; what each record becomes: torch_scenario_p2p.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "harness/history/torch_job.h"
#include "harness/history/torch_trace.h"
#include "harness/model/scenario.h"

namespace collcheck {

class MpiP2pWriter {
 public:
  explicit MpiP2pWriter(const std::vector<TorchDump>& dumps);
  // Whether process group `pg`'s point-to-point calls are written.
  bool writes(const std::string& pg) const { return members_.count(pg) > 0; }
  const std::map<std::string, std::vector<int>>& groups() const { return members_; }
  // One rank's program, record by record: start_rank, then for each record
  // waits_before (the `wait:` steps of requests completed before it was
  // made) and, for a point-to-point one, place; end_rank adds the waits left.
  void start_rank(int rank);
  void waits_before(int64_t created_ns, Program& prog);
  // Appends the record's call step (and, after a Sendrecv's receive, the wait
  // of its send); `fill` sets dtype, count and shape as for a collective.
  // Returns the call step's index.
  size_t place(const TorchDump& d, const TorchEntry& e, const std::string& group, bool finished,
                            Program& prog, const std::function<void(CallStep&)>& fill);
  void end_rank(Program& prog);
  std::vector<std::string> notes;  // groups left out, and why

 private:
  std::map<std::string, std::vector<int>> members_;  // the groups written: their world ranks
  std::map<std::tuple<std::string, int, int, bool>, uint64_t> counted_;  // (pg, from, to, send) -> records placed
  std::map<std::tuple<std::string, int, int, uint64_t>, uint64_t> sent_;  // (pg, from, to, n) -> elements
  std::map<int, std::multimap<int64_t, std::string>> pending_;           // rank -> completed requests' waits
  std::map<int, std::string> sendrecv_handle_;
  int current_rank_ = -1;
};

}  // namespace collcheck
