// A rank that never joined a call the others are in.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "harness/check/detectors.h"

namespace collcheck::detect {

std::optional<Diagnosis> missing_rank(const Dumps& dumps) {
  for (const uint64_t k : seqs_in(dumps)) {
    std::vector<int> joined, missing;
    const CallRecord* joined_call = nullptr;
    for (const auto& d : dumps) {
      const CallRecord* c = call_of(d, k);
      (c ? joined : missing).push_back(d.rank);
      if (c && !joined_call) joined_call = c;
    }
    if (missing.empty()) continue;
    // Joined ranks that did not finish the call: they waited for the missing ones.
    bool stuck = false;
    for (const auto& d : dumps) {
      const CallRecord* c = call_of(d, k);
      if (c && !finished(*c)) stuck = true;
    }
    if (!stuck) continue;
    Diagnosis dg;
    dg.kind = DiagnosisKind::MissingRank;
    dg.seq = k;
    dg.ranks = missing;
    dg.text = fmt::format("{} never joined call #{} ({}), which {} joined but could not finish; last call completed "
                          "per rank: {}",
                          ranks_text(missing), k, fp_text(*joined_call),
                          ranks_text(joined), last_completed_text(dumps));
    // Missing ranks whose program had ended without a failure (an early
    // exit, a shorter loop): nothing was left for them to issue.
    std::vector<int> ended;
    for (const auto& d : dumps)
      if (std::find(missing.begin(), missing.end(), d.rank) != missing.end() && d.rest_known && d.not_run.empty() &&
          std::none_of(d.calls.begin(), d.calls.end(), [](const CallRecord& c) { return c.state == CallState::Failed; }))
        ended.push_back(d.rank);
    if (!ended.empty()) {
      // Calls just before #k alike to it: a rank that skipped any one of them
      // and then ended leaves this very record, so the cause may be a skip.
      const RankDump& first_joined =
          *std::find_if(dumps.begin(), dumps.end(), [&](const RankDump& d) { return d.rank == joined.front(); });
      const CallKey key = call_key(*joined_call);
      uint64_t from = k;
      while (from > 1) {
        const CallRecord* c = call_of(first_joined, from - 1);
        if (c == nullptr || call_key(*c) != key) break;
        --from;
      }
      const std::string causes =
          from < k ? fmt::format("an exit, a loop that ran out early, or a skip of any one of calls #{}-#{}, which "
                                 "are alike: a rank that skips one of them and then ends leaves this same record",
                                 from, k)
                   : "an exit, or a loop that ran out early";
      dg.text += fmt::format("; {} had ended {} program with no call left to issue ({})", ranks_text(ended),
                             ended.size() == 1 ? "its" : "their", causes);
    }
    return dg;
  }
  return std::nullopt;
}

}  // namespace collcheck::detect
