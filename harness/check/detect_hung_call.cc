// A rank that entered a call and never came back from it: the run's limit
// passed with the call still running on that rank, which was not waiting on
// any transfer. It is stuck inside the implementation (a loop, a blocking call
// of another library), not in a cycle of waits; the other ranks' calls with it
// fail at their deadlines, which this explains.
#include <fmt/format.h>

#include "harness/check/detectors.h"

namespace collcheck::detect {

void hung_call(const Dumps& dumps, const AnalysisOptions&, std::vector<Diagnosis>& out) {
  Diagnosis dg;
  dg.kind = DiagnosisKind::HungCall;
  const CallRecord* first = nullptr;
  for (const auto& d : dumps) {
    if (d.reason != "run limit" || d.blocked_on.blocked) continue;
    for (const auto& c : d.calls) {
      if (c.state != CallState::Started) continue;
      dg.ranks.push_back(d.rank);
      if (!first || c.seq < first->seq) first = &c;
      break;
    }
  }
  if (!first) return;
  dg.seq = first->seq;
  dg.text = fmt::format("{} entered call #{} ({}) and never returned from it: the run's limit passed with the call "
                        "still running there, not waiting on any transfer, so it is stuck inside the "
                        "implementation; the other ranks' transfers with it failed at their deadlines",
                        ranks_text(dg.ranks), first->seq, fp_text(*first));
  out.push_back(dg);
}

}  // namespace collcheck::detect
