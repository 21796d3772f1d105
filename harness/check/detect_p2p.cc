// Point-to-point calls that do not pair up: the n-th send from a to b meets
// the n-th receive at b from a (NCCL and MPI match them in order). A receive
// left waiting for a message never sent names the sender; a send left waiting
// for a receive never posted names the receiver; a pair whose sizes or dtypes
// differ is a mismatch.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "harness/check/detectors.h"

namespace collcheck::detect {

void p2p(const Dumps& dumps, const AnalysisOptions&, std::vector<Diagnosis>& out) {
  // (group, from, to) -> the sends of `from` and the receives of `to`, in order.
  std::map<std::tuple<std::string, int, int>, std::pair<std::vector<const CallRecord*>, std::vector<const CallRecord*>>>
      pairs;
  for (const auto& d : dumps) {
    if (!d.p2p) continue;
    for (const auto& c : d.calls) {
      if (c.coll == Collective::Send) pairs[{d.group, d.rank, c.peer}].first.push_back(&c);
      if (c.coll == Collective::Recv) pairs[{d.group, c.peer, d.rank}].second.push_back(&c);
    }
  }
  for (const auto& [key, sr] : pairs) {
    const auto& [group, from, to] = key;
    const auto& [sends, recvs] = sr;
    const std::string in = group_prefix(group);
    for (size_t i = 0; i < std::max(sends.size(), recvs.size()); ++i) {
      const CallRecord* s = i < sends.size() ? sends[i] : nullptr;
      const CallRecord* r = i < recvs.size() ? recvs[i] : nullptr;
      Diagnosis dg;
      dg.seq = (s ? s : r)->seq;
      dg.group = group;
      if (s && r) {
        if (s->count == r->count && s->dtype == r->dtype) continue;
        dg.kind = DiagnosisKind::ShapeMismatch;
        if (s->count != r->count) dg.fields.push_back("count");
        if (s->dtype != r->dtype) dg.fields.push_back("dtype");
        dg.ranks = {to};
        dg.seq = r->seq;
        dg.text = fmt::format("{}mismatched shapes in point-to-point message #{} from rank {} to rank {}: rank {} sent "
                              "{} count={} {}, rank {} posted a receive of {} count={} {}",
                              in, i + 1, from, to, from, s->tag, s->count, dtype_name(s->dtype), to, r->tag, r->count,
                              dtype_name(r->dtype));
        out.push_back(dg);
        return;
      }
      const CallRecord* waiting = s ? s : r;
      if (finished(*waiting)) continue;  // buffered, or the run ended first: nothing waited on it
      dg.kind = DiagnosisKind::MissingRank;
      dg.ranks = {s ? to : from};
      dg.text = s ? fmt::format("{}rank {} waits to send message #{} ({} count={}) to rank {}, which never posted the "
                                "matching receive (it received {} message(s) from rank {})",
                                in, from, i + 1, s->tag, s->count, to, recvs.size(), from)
                  : fmt::format("{}rank {} waits to receive message #{} ({} count={}) from rank {}, which never sent it "
                                "(it sent {} message(s) to rank {})",
                                in, to, i + 1, r->tag, r->count, from, sends.size(), to);
      out.push_back(dg);
      return;
    }
  }
}

}  // namespace collcheck::detect
