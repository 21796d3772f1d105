// Blocking collectives of two communicators completed in opposite orders on
// two ranks, in collcheck's MPI interposer's dumps (torch_analysis.h). MPI
// requires that such calls be ordered so that no cycle of waits can form
// (MPI-3, 5.14); an implementation that does not synchronize in them (Open
// MPI's MPI_Comm_free, a broadcast that goes eagerly) finishes the job, and
// one that does hangs it. A job that hung is named by the cycle it hung in
// (the calls did not complete), so this finds the cycles that did not hang.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "harness/check/torch_analysis.h"

namespace collcheck {

namespace {

struct Issued {
  std::map<std::string, std::vector<std::pair<int64_t, const TorchEntry*>>> by_group;  // group -> (seq, entry), issue order
  std::map<std::pair<std::string, int64_t>, size_t> position;                          // (group, seq) -> issue index
};

Issued issued_of(const TorchDump& d) {
  Issued out;
  size_t i = 0;
  for (const auto& e : d.entries) {
    if (e.p2p || e.op.starts_with("mpi:i") || !torch_entry_ended(e)) continue;  // blocking and ended only
    const std::string k = torch_group_key(d, e);
    out.by_group[k].push_back({e.collective_seq, &e});
    out.position[{k, e.collective_seq}] = i++;
  }
  return out;
}

std::string site(const TorchEntry& e) {
  const std::string s = torch_call_site(e);
  return s.empty() ? "" : " at " + s;
}

}  // namespace

void add_mpi_order_findings(const std::vector<TorchDump>& dumps, TorchAnalysis& out) {
  std::map<int, Issued> ranks;
  std::map<int, const TorchDump*> dump_of;
  for (const auto& d : dumps)
    if (!d.collcheck_reason.empty()) ranks[d.rank] = issued_of(d), dump_of[d.rank] = &d;
  std::set<int> named;
  for (const auto& d : out.diagnoses) named.insert(d.ranks.begin(), d.ranks.end());
  size_t pairs = 0;
  std::optional<Diagnosis> first;
  for (auto r = ranks.begin(); r != ranks.end(); ++r)
    for (auto q = std::next(r); q != ranks.end(); ++q) {
      if (named.count(r->first) || named.count(q->first)) continue;
      // A call x of group k before y of group k2 on r, and y before x on q.
      // The first y after x on r is enough: q makes k2's calls in their order.
      const Issued& a = r->second;
      const Issued& b = q->second;
      bool found = false;
      for (const auto& [k, xs] : a.by_group) {
        for (const auto& [k2, ys] : a.by_group) {
          if (k2 == k || found) continue;
          size_t j = 0;
          for (const auto& [x, ex] : xs) {
            const size_t pa = a.position.at({k, x});
            while (j < ys.size() && a.position.at({k2, ys[j].first}) < pa) ++j;
            if (j == ys.size()) break;
            const auto qx = b.position.find({k, x});
            const auto qy = b.position.find({k2, ys[j].first});
            if (qx == b.position.end() || qy == b.position.end() || qy->second > qx->second) continue;
            found = true;
            if (first) break;
            const TorchEntry& ey = *ys[j].second;
            Diagnosis d;
            d.kind = DiagnosisKind::Deadlock;
            d.ranks = {r->first, q->first};
            d.group = k;
            d.seq = static_cast<uint64_t>(x);
            d.text = fmt::format(
                "ranks {} and {} made blocking collectives of two communicators in opposite orders: rank {} called "
                "#{} of {} ({}{}) before #{} of {} ({}{}), rank {} the other way round. MPI requires an order "
                "without a cycle of waits; these calls completed only because this MPI did not synchronize in "
                "them, and one that does hangs here",
                r->first, q->first, r->first, x, k, torch_entry_text(*ex), site(*ex), ys[j].first, k2,
                torch_entry_text(ey), site(ey), q->first);
            first = std::move(d);
            break;
          }
        }
        if (found) break;
      }
      pairs += found;
    }
  if (!first) return;
  if (pairs > 1) first->text += fmt::format(" ({} pairs of ranks are in the same inversion or another)", pairs);
  out.diagnoses.push_back(std::move(*first));
}

}  // namespace collcheck
