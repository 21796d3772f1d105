// Diagnosis: from what every rank recorded (the flight recorder's dumps, in
// memory or read back from files), name what went wrong. The same analysis
// serves `collcheck replay` (both modes) and `collcheck analyze <dump dir>`.
// A checker never knows which fault was injected (DESIGN.md: faults and
// checks never know each other).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/history/flight_recorder.h"

namespace collcheck {

enum class DiagnosisKind : uint8_t {
  ShapeMismatch,     // same call, different count, dtype or op on some ranks
  OrderMismatch,     // ranks issued their calls in different orders
  ExtraCall,         // some ranks issued calls the others did not; the calls after them agree again
  SkippedCall,       // some ranks skipped calls a strict majority made; the calls after them agree again
  MissingRank,       // some ranks never joined a call the others are in
  LateRank,          // some ranks joined a call after the others in it had given up (their deadline passed)
  Deadlock,          // ranks wait on each other in a cycle
  UnwaitedWork,      // an async call whose wait() was never made
  ReadBeforeWait,    // an async call's output was read before its wait()
  WriteBeforeWait,   // an async call's buffer was written before its wait()
  SlowLink,          // one directed edge is much slower than the others
  CorruptedPayload,  // bytes differ between what was sent and what arrived
  WrongResult,       // a result the oracle rejects, with no other explanation
  CallFailed,        // a call failed for another reason (its error is quoted)
  RankCrashed,       // a rank's thread (or process) died of a signal; the dumps were written by the crash handler
  HungCall,          // a rank entered a call and never returned from it (stuck inside the implementation)
};
std::string_view diagnosis_name(DiagnosisKind k);
std::optional<DiagnosisKind> parse_diagnosis(std::string_view s);
std::string diagnosis_choices();

struct Diagnosis {
  DiagnosisKind kind = DiagnosisKind::CallFailed;
  std::vector<int> ranks;
  std::optional<uint64_t> seq;
  std::string group;   // the process group of `seq` ("" for the world)
  std::vector<std::string> fields;
  std::optional<std::pair<int, int>> edge;
  double factor = 0;   // SlowLink: how much slower than the other edges
  std::string text;    // one readable paragraph
};

struct AnalysisOptions {
  bool run_finished = true;  // every rank returned (else unwaited work is not judged)
  // SlowLink: an edge is slow when its median latency exceeds both this many
  // times the median of the other edges and this absolute excess.
  double slow_factor = 4.0;
  double slow_min_excess_s = 0.015;
  // Every communicator's dumps (the world's, each group's, point-to-point),
  // where analyze() runs the table on one communicator's: a detector that
  // asks what a rank did elsewhere (late_rank: was it itself waiting?) looks
  // here. Null: the dumps the detector was given are all there is.
  const std::vector<RankDump>* every_dump = nullptr;
};

// Findings in order of precedence (the table of detectors, detectors.cc): a
// mismatch or a missing rank explains the timeouts that follow it, so they
// come first. Rendered as text by harness/report/diagnosis_text.h.
std::vector<Diagnosis> analyze(const std::vector<RankDump>& dumps, const AnalysisOptions& o = {});

// Reads <dir>/rank-*.json. Throws std::runtime_error naming the file.
std::vector<RankDump> load_dumps(const std::string& dir);

// What a finding in a process group's call starts with: "process group tp: "
// ("" for the world).
std::string group_prefix(const std::string& group);

// "rank 2", "ranks 0, 1, 3".
std::string ranks_text(const std::vector<int>& r);
// The reference among groups of ranks that disagree (a map from what they
// did to the ranks that did it): the largest group; on a tie, the one holding
// the lowest rank. The mismatch detectors of both dump formats use it.
template <typename Groups>
typename Groups::const_iterator majority_group(const Groups& groups) {
  auto ref = groups.begin();
  for (auto it = groups.begin(); it != groups.end(); ++it)
    if (it->second.size() > ref->second.size() ||
        (it->second.size() == ref->second.size() && it->second.front() < ref->second.front()))
      ref = it;
  return ref;
}
// The same with runs of three or more as ranges: "ranks 0-21, 23-109, 111".
std::string rank_ranges_text(const std::vector<int>& r);

}  // namespace collcheck
