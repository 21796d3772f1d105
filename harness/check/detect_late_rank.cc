// A rank that joined a call after the ranks already in it had given up (their
// deadline passed while they waited for it). It did join, so missing_rank
// does not see it, and the ranks it kept waiting show up elsewhere as the
// ones that never came (a send never made, a group call never entered): the
// blame would fall downstream (issue 31). This names the late rank, the call,
// and how late it was.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "harness/check/detectors.h"

namespace collcheck::detect {

std::optional<Diagnosis> late_rank(const Dumps& dumps) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  for (const uint64_t k : seqs_in(dumps)) {
    // When the first rank in the call gave up: its call failed at t_completed.
    double gave_up = kNever;
    for (const auto& d : dumps)
      if (const CallRecord* c = call_of(d, k); c && c->state == CallState::Failed && c->t_started >= 0 && c->t_completed >= 0)
        gave_up = std::min(gave_up, c->t_completed);
    if (gave_up == kNever) continue;
    std::vector<int> late, waited;
    double late_at = kNever, first_in = kNever, last_on_time = -1;
    const CallRecord* call = nullptr;
    for (const auto& d : dumps) {
      const CallRecord* c = call_of(d, k);
      if (!c || c->t_started < 0) continue;
      call = call ? call : c;
      if (c->t_started > gave_up) {
        late.push_back(d.rank);
        late_at = std::min(late_at, c->t_started);
      } else {
        waited.push_back(d.rank);
        first_in = std::min(first_in, c->t_started);
        last_on_time = std::max(last_on_time, c->t_started);
      }
    }
    if (late.empty() || waited.empty()) continue;
    Diagnosis dg;
    dg.kind = DiagnosisKind::LateRank;
    dg.seq = k;
    dg.ranks = late;
    dg.text = fmt::format("{} joined call #{} ({}) at {:.3f} s, {:.3f} s after {} had entered it (from {:.3f} s) and "
                          "{:.3f} s after the first of them gave up waiting at {:.3f} s (its deadline): the others "
                          "waited for {}, and whatever waited for them waited for {} too",
                          ranks_text(late), k, fp_text(*call), late_at, late_at - last_on_time, ranks_text(waited),
                          first_in, late_at - gave_up, gave_up, late.size() == 1 ? "it" : "them",
                          late.size() == 1 ? "it" : "them");
    return dg;
  }
  return std::nullopt;
}

}  // namespace collcheck::detect
