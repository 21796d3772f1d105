// The diagnosis as a table of detectors, one per fault family, each in its
// own file (detect_<family>.cc). analyze() (diagnosis.cc) runs the rows in
// order; a row's precedence says which earlier findings make it moot (a
// mismatch or a missing rank explains the timeouts that follow it). A new
// fault family is one detector file (CMake takes every detect_*.cc) and one
// row in detectors.cc, with its declaration beside it. A detector
// reads only the dumps: it never knows which fault was injected.
#pragma once

#include <map>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/check/diagnosis.h"

namespace collcheck::detect {

using Dumps = std::vector<RankDump>;
using DetectFn = void (*)(const Dumps& dumps, const AnalysisOptions& o, std::vector<Diagnosis>& out);

struct Detector {
  std::string_view family;
  DetectFn detect;
  // Skipped when an earlier row found one of these kinds.
  std::vector<DiagnosisKind> unless;
  // Runs only when no earlier row found anything.
  bool last_resort = false;
};
// The rows, in order of precedence.
const std::vector<Detector>& detectors();

// The rows' detectors are declared beside the table (detectors.cc). These
// two run apart from it, over every communicator's dumps (diagnosis.cc).
// Across process groups and point-to-point calls: every communicator's dumps.
std::optional<Diagnosis> call_cycle(const Dumps&);    // detect_deadlock.cc
// The wait-for graph's first cycle among `stuck` ranks (each edge r -> q: r
// waits on q), walking from the lowest rank; empty when there is none. The
// replay's cycle detector and the analysis of PyTorch dumps both use it.
std::vector<int> find_wait_cycle(const std::map<int, std::vector<int>>& edges, const std::set<int>& stuck);
void p2p(const Dumps&, const AnalysisOptions&, std::vector<Diagnosis>&);  // detect_p2p.cc: the p2p dumps
void async_work(const Dumps&, const AnalysisOptions&, std::vector<Diagnosis>&);  // detect_async_work.cc: also on the p2p dumps

// What several detectors read (detectors.cc).
const CallRecord* call_of(const RankDump& d, uint64_t seq);
// What makes two ranks' calls the same call: tag, count, dtype, op (of a
// reduction), collective, peer, and (under MPI's matching rule) whether it is
// non-blocking. The mismatch detectors compare these.
using CallKey = std::tuple<std::string, size_t, int, int, int, int, bool>;
CallKey call_key(const CallRecord& c);
uint64_t last_seq(const RankDump& d);
// Every call number some rank recorded, in order (what the detectors walk:
// never 1..max, which a damaged dump could make 2^64 long).
std::vector<uint64_t> seqs_in(const Dumps& dumps);
uint64_t last_completed(const RankDump& d);
// The call ended well: completed (and, if async, maybe waited).
bool finished(const CallRecord& c);
std::string last_completed_text(const Dumps& dumps);  // "0: #3, 1: #2, ...": the last call each rank completed
std::string fp_text(const CallRecord& c);             // "bucket_0 count=2048 bfloat16 sum"
// Each send with its receive, by (src, dst, tag, ordinal); either side may be missing.
using TransferPairs = std::map<std::tuple<int, int, Tag, uint64_t>, std::pair<const TransferRecord*, const TransferRecord*>>;
TransferPairs transfer_pairs(const Dumps& dumps);

}  // namespace collcheck::detect
