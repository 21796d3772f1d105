// Shape and order mismatches: ranks that disagree on a call.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "harness/check/detectors.h"

namespace collcheck::detect {

// The first sequence number at which ranks disagree on the call.
std::optional<Diagnosis> mismatch(const Dumps& dumps) {
  for (const uint64_t k : seqs_in(dumps)) {
    using Key = std::tuple<std::string, size_t, int, int, int, int>;
    std::map<Key, std::vector<int>> groups;
    std::map<Key, const CallRecord*> sample;
    for (const auto& d : dumps) {
      const CallRecord* c = call_of(d, k);
      if (!c) continue;
      const auto key = std::make_tuple(c->tag, c->count, static_cast<int>(c->dtype),
                                       reduces(c->coll) ? static_cast<int>(c->op) : 0, static_cast<int>(c->coll), c->peer);
      groups[key].push_back(d.rank);
      sample[key] = c;
    }
    if (groups.size() < 2) continue;
    // The majority is the reference; on a tie, the group with the lowest rank.
    const auto ref = majority_group(groups);
    Diagnosis d;
    d.seq = k;
    const CallRecord& r = *sample[ref->first];
    std::set<std::string> fields;
    std::string others;
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      if (it == ref) continue;
      d.ranks.insert(d.ranks.end(), it->second.begin(), it->second.end());
      const CallRecord& o = *sample[it->first];
      if (o.tag != r.tag) fields.insert("tag");
      if (o.coll != r.coll) fields.insert("collective");
      if (o.coll == r.coll && o.peer != r.peer) fields.insert(r.coll == Collective::Broadcast ? "root" : "peer");
      if (o.count != r.count) fields.insert("count");
      if (o.dtype != r.dtype) fields.insert("dtype");
      if (o.op != r.op && reduces(r.coll)) fields.insert("op");
      others += fmt::format("; {} called {}", ranks_text(it->second), fp_text(o));
    }
    std::sort(d.ranks.begin(), d.ranks.end());
    d.fields.assign(fields.begin(), fields.end());
    d.kind = fields.count("tag") || fields.count("collective") ? DiagnosisKind::OrderMismatch : DiagnosisKind::ShapeMismatch;
    std::string flist;
    for (const auto& f : d.fields) flist += (flist.empty() ? "" : ", ") + f;
    d.text = fmt::format("{} at call #{}: {} called {}{} (differs in: {})",
                         d.kind == DiagnosisKind::OrderMismatch ? "collectives called in a different order"
                                                                : "mismatched shapes",
                         k, ranks_text(ref->second), fp_text(r), others, flist);
    size_t reached = 0;
    for (const auto& [key, ranks] : groups) reached += ranks.size();
    if (2 * ref->second.size() <= reached) {
      // No strict majority: which side is the odd one out is a guess.
      d.text += fmt::format("; no strict majority ({} of the {} ranks reached call #{}), so the group with the "
                            "lowest rank was taken as the reference",
                            reached, dumps.size(), k);
    }
    return d;
  }
  return std::nullopt;
}

}  // namespace collcheck::detect
