// A PyTorch Flight Recorder dump set turned into a scenario that reproduces
// it (`collcheck analyze DUMPS --emit-scenario out.yaml`): the process groups
// as torch_job.h reads them, and per rank the collectives its trace buffer recorded, in
// the order the rank issued them, from the first sequence number that every
// rank of the group still holds. Each call is async (the dumps' calls were
// enqueued on the rank's stream and waited at the end), so a rank that
// stopped issuing leaves the others stuck at the call it never joined: the
// replay diverges where the job did.
//
// Kept from each entry: the collective, the process group, the input's shape
// and dtype. Sizes are scaled down (one factor for every call, distinct sizes
// kept distinct) so that the largest call fits TorchScenarioOptions::max_count:
// a hang or a size mismatch does not depend on the bytes, and 16 ranks of
// 40 MB calls would take minutes on a laptop. A call's tag is "<collective>#<its sequence number in the dump>",
// so the replay's diagnosis names the dump's call. A rank that left no dump
// makes the calls its groups' other ranks show it made, then exits (it crashed
// or exited there); one whose buffer is empty makes none. DETAIL's
// fingerprint all_gathers are left out. Point-to-point entries are
// left out (a rank's buffer does not say which of its sends the other side's
// oldest receive pairs with); so are reduction ops the dump does not record
// (sum is used). The notes say what was left out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/history/torch_job.h"
#include "harness/history/torch_trace.h"
#include "harness/model/scenario.h"

namespace collcheck {

struct TorchScenarioOptions {
  // The largest call's element count in the scenario: larger calls are scaled
  // down by one factor for all (0: the dumps' sizes).
  uint64_t max_count = 65536;
  std::optional<int> world_size;  // the job's size, when the dumps do not hold it
  // (rank, group key) -> the call the analysis says the rank never joined: a
  // rank without a dump is written as having made its groups' calls before
  // that one (else: every call all the group's ranks with a dump ended), then
  // exited.
  std::map<std::pair<int, std::string>, int64_t> stopped_before;
  // Members the dumps do not list but the analysis inferred (group key -> ranks).
  std::map<std::string, std::vector<int>> extra_members;
};

struct TorchScenario {
  Scenario scenario;
  std::map<std::string, std::string> group_of_pg;  // dump's process group name -> scenario group name
  std::map<std::string, int64_t> first_seq;        // dump's process group name -> its first emitted sequence number
  uint64_t scale = 1;                              // the dumps' counts were divided by this
  std::vector<std::string> notes;
};

// Throws TorchTraceError when the dumps cannot be written as a scenario (a
// dtype collcheck does not have, say), naming the file and the entry.
TorchScenario torch_scenario(const std::vector<TorchDump>& dumps, const std::string& source,
                             const TorchScenarioOptions& o = {});

// The scenario's call number of a dump's collective sequence number `seq` in
// process group `pg`, when it was emitted.
std::optional<uint64_t> scenario_seq(const TorchScenario& t, const std::string& pg, int64_t seq);

}  // namespace collcheck
