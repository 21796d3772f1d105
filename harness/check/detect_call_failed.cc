// The last resort: a failed call with nothing else to explain it, its error quoted.
#include <fmt/format.h>

#include "harness/check/detectors.h"

namespace collcheck::detect {

void call_failed(const Dumps& dumps, const AnalysisOptions&, std::vector<Diagnosis>& out) {
  for (const auto& d : dumps) {
    for (const auto& c : d.calls) {
      if (c.state == CallState::Failed) {
        Diagnosis dg;
        dg.kind = DiagnosisKind::CallFailed;
        dg.seq = c.seq;
        dg.ranks = {d.rank};
        dg.text = fmt::format("call #{} failed on rank {}: {}", c.seq, d.rank, c.error);
        out.push_back(dg);
        return;
      }
    }
  }
}

}  // namespace collcheck::detect
