// Async work misused: an output read before its wait(), and (in a finished
// run) an async call never waited for.
#include <fmt/format.h>

#include <map>

#include "harness/check/detectors.h"

namespace collcheck::detect {

void async_work(const Dumps& dumps, const AnalysisOptions& o, std::vector<Diagnosis>& out) {
  std::map<uint64_t, std::vector<int>> unwaited, early;
  for (const auto& d : dumps) {
    for (const auto& c : d.calls) {
      if (c.async && c.t_read >= 0 && (c.t_waited < 0 || c.t_read < c.t_waited)) early[c.seq].push_back(d.rank);
      if (c.async && o.run_finished && c.state == CallState::Completed) unwaited[c.seq].push_back(d.rank);
    }
  }
  if (!early.empty()) {
    Diagnosis dg;
    dg.kind = DiagnosisKind::ReadBeforeWait;
    dg.seq = early.begin()->first;
    dg.ranks = early.begin()->second;
    dg.text = fmt::format("the output of async call #{} was read on {} before its wait(); collcheck poisons "
                          "unwaited outputs, so the read saw poison, not the result",
                          *dg.seq, ranks_text(dg.ranks));
    out.push_back(dg);
  }
  if (!unwaited.empty()) {
    Diagnosis dg;
    dg.kind = DiagnosisKind::UnwaitedWork;
    dg.seq = unwaited.begin()->first;
    dg.ranks = unwaited.begin()->second;
    dg.text = fmt::format("async call #{} completed on {} but its wait() was never made", *dg.seq,
                          ranks_text(dg.ranks));
    out.push_back(dg);
  }
}

}  // namespace collcheck::detect
