// A rank that joined a call after the ranks already in it had given up (their
// deadline passed while they waited for it). It did join, so missing_rank
// does not see it, and the ranks it kept waiting show up elsewhere as the
// ones that never came (a send never made, a group call never entered): the
// blame would fall downstream (issue 31). This names the late rank, the call,
// and how late it was. A rank that came late because it was itself waiting
// in another call (one that failed while the others waited for it: queued
// behind its own stuck call) is not the cause: blame goes on upstream, and
// the missing-rank and deadlock detectors name where.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "harness/check/detectors.h"

namespace collcheck::detect {

namespace {
// Whether `rank` was in another call between `from` and `to` that did not
// complete (it failed, or never ended): it was waiting on someone itself.
bool waited_elsewhere(const Dumps& every, int rank, const std::string& group, uint64_t seq, double from, double to) {
  for (const auto& d : every) {
    if (d.rank != rank) continue;
    for (const auto& c : d.calls) {
      if (d.group == group && !d.p2p && c.seq == seq) continue;
      if (c.t_started < 0 || c.t_started >= to || finished(c)) continue;
      if (c.t_completed < 0 || c.t_completed >= from) return true;
    }
  }
  return false;
}
}  // namespace

void late_rank(const Dumps& dumps, const AnalysisOptions& o, std::vector<Diagnosis>& out) {
  const Dumps& every = o.every_dump ? *o.every_dump : dumps;
  constexpr double kNever = std::numeric_limits<double>::infinity();
  for (const uint64_t k : seqs_in(dumps)) {
    // When the first rank in the call gave up: its call failed at t_completed.
    double gave_up = kNever;
    for (const auto& d : dumps)
      if (const CallRecord* c = call_of(d, k); c && c->state == CallState::Failed && c->t_started >= 0 && c->t_completed >= 0)
        gave_up = std::min(gave_up, c->t_completed);
    if (gave_up == kNever) continue;
    // A rank that never joined explains why the others gave up (missing_rank
    // names it): lateness is said only of a call every rank came to.
    if (std::any_of(dumps.begin(), dumps.end(), [&](const RankDump& d) { return call_of(d, k) == nullptr; })) continue;
    std::vector<int> late, waited;
    double first_in = kNever, last_on_time = -1;
    const CallRecord* call = nullptr;
    for (const auto& d : dumps) {
      const CallRecord* c = call_of(d, k);
      if (!c || c->t_started < 0) continue;
      call = call ? call : c;
      if (c->t_started > gave_up) {
        late.push_back(d.rank);
      } else {
        waited.push_back(d.rank);
        first_in = std::min(first_in, c->t_started);
        last_on_time = std::max(last_on_time, c->t_started);
      }
    }
    if (late.empty() || waited.empty()) continue;
    const std::string group = dumps.front().group;
    // The others waited for it: some rank of the call is left blocked on a
    // transfer of call k with it (its world rank, or its index in the group).
    // A rank that merely started after a failure (the others' deadline ran
    // out while they waited for someone else, in a guard's exchange, say) is
    // not the one they waited for.
    std::erase_if(late, [&](int r) {
      const auto& m = dumps.front().members;
      const auto at = std::find(m.begin(), m.end(), r);
      const int local = at == m.end() ? -1 : static_cast<int>(at - m.begin());
      return std::none_of(dumps.begin(), dumps.end(), [&](const RankDump& d) {
        const BlockedOn& b = d.blocked_on;
        return d.rank != r && b.blocked && call_of_tag(b.tag) == k && (b.peer == r || b.peer == local);
      });
    });
    std::erase_if(late, [&](int r) {
      const CallRecord* c = nullptr;
      for (const auto& d : dumps)
        if (d.rank == r) c = call_of(d, k);
      return waited_elsewhere(every, r, group, k, first_in, c ? c->t_started : kNever);
    });
    if (late.empty()) continue;
    double late_at = kNever;  // when the first of those left came
    for (const auto& d : dumps)
      if (const CallRecord* c = call_of(d, k); c && std::find(late.begin(), late.end(), d.rank) != late.end())
        late_at = std::min(late_at, c->t_started);
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
    out.push_back(std::move(dg));
    return;
  }
}

}  // namespace collcheck::detect
