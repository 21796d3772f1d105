// The diagnosis of PyTorch Flight Recorder dumps (harness/history/
// torch_trace.h), per process group and in collcheck's own kinds and words:
// collectives that disagree at one sequence number (order_mismatch: another
// collective; shape_mismatch: another dtype or size), and ranks missing from a
// collective that the group's other ranks entered and could not finish
// (missing_rank). When a fault stops a rank, it goes missing from several
// groups at once; the group whose stuck collective was entered first comes
// first: that is where the job stopped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/check/diagnosis.h"
#include "harness/history/torch_trace.h"

namespace collcheck {

// A process group whose ranks are not all at the same collective.
struct TorchGroupLag {
  std::string name, desc;
  std::vector<int> ranks;             // the group's ranks
  std::map<int, int64_t> last;        // the last collective each rank with a dump recorded
  std::vector<int> missing, joined;   // missing: at the lowest last collective
  int64_t stuck_seq = 0;              // the first collective the missing ranks never joined
  std::optional<TorchEntry> stuck;    // as the lowest joined rank recorded it (absent: out of every buffer)
  int64_t entered_ns = 0;             // when the first joined rank entered it
};

struct TorchAnalysis {
  // Mismatches first, then the missing ranks, earliest stuck collective first.
  std::vector<Diagnosis> diagnoses;
  std::vector<TorchGroupLag> lags;  // the missing-rank rows, in the same order
  std::vector<std::string> notes;   // what the dumps cannot tell (a rank without a dump, say)
};

TorchAnalysis analyze_torch(const std::vector<TorchDump>& dumps);

}  // namespace collcheck
