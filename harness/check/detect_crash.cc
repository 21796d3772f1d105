// A rank that died of a signal (the crash handler wrote the dumps).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "harness/check/detectors.h"

namespace collcheck::detect {

// The crash handler wrote the dumps: name the rank that died, of which
// signal, and where it was (the call it had begun and not finished, or the
// last call it finished).
std::optional<Diagnosis> crash(const Dumps& dumps) {
  const CrashNote* note = nullptr;
  for (const auto& d : dumps)
    if (d.crash) note = &*d.crash;
  if (!note) return std::nullopt;
  Diagnosis dg;
  dg.kind = DiagnosisKind::RankCrashed;
  const std::string last = last_completed_text(dumps);
  if (note->rank < 0) {
    dg.text = fmt::format("the process died of signal {} on a thread that is not a rank's (a library's own thread, "
                          "or the driver); last call completed per rank: {}",
                          note->signal, last);
    return dg;
  }
  dg.ranks = {note->rank};
  std::string where = "(its dump is not here)";
  for (const auto& d : dumps) {
    if (d.rank != note->rank) continue;
    const CallRecord* in_call = nullptr;  // the first call it had not finished
    for (const auto& c : d.calls) {
      if (c.state == CallState::Scheduled || c.state == CallState::Started) {
        in_call = &c;
        break;
      }
    }
    if (in_call) {
      dg.seq = in_call->seq;
      where = fmt::format("in call #{} ({}), which it had {}", in_call->seq, fp_text(*in_call),
                          in_call->state == CallState::Started ? "begun" : "scheduled but not begun");
    } else if (const uint64_t k = last_completed(d)) {
      where = fmt::format("outside any call, after call #{}", k);
    } else {
      where = "before its first call";
    }
  }
  dg.text = fmt::format("rank {} died of signal {} {}; last call completed per rank: {}", note->rank, note->signal,
                        where, last);
  return dg;
}

}  // namespace collcheck::detect
