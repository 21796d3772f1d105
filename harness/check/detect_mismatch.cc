// Shape and order mismatches: ranks that disagree on a call. When the calls
// after it agree again once one side's first calls are set aside, the
// mismatch is an extra call on that side, or calls the other side skipped.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "harness/check/detectors.h"

namespace collcheck::detect {

namespace {

using Key = CallKey;

// A rank's calls from call #k on: what it recorded, then what its program
// would have issued next (recorded when it ended, never run); `complete`
// when that is the whole rest of its program.
struct Rest {
  std::vector<Key> keys;
  std::vector<const CallRecord*> calls;
  bool complete = false;
};

Rest rest_of(const RankDump& d, uint64_t k) {
  Rest r;
  for (const auto& c : d.calls)
    if (c.seq >= k) {
      r.keys.push_back(call_key(c));
      r.calls.push_back(&c);
    }
  for (const auto& c : d.not_run) {
    r.keys.push_back(call_key(c));
    r.calls.push_back(&c);
  }
  r.complete = d.rest_known && !d.crash;
  return r;
}

// The number of calls at the front of `a` that `b` lacks: the smallest s
// after which a's calls are b's, one for one. With both rests complete the
// counts must match too (a swap of the last two calls is not an extra call);
// otherwise two calls at least must agree.
constexpr size_t kMaxShift = 8;
std::optional<size_t> extra_calls(const Rest& a, const Rest& b) {
  for (size_t s = 1; s <= kMaxShift && s < a.keys.size(); ++s) {
    const size_t overlap = std::min(a.keys.size() - s, b.keys.size());
    if (overlap == 0) break;
    if (!std::equal(b.keys.begin(), b.keys.begin() + static_cast<std::ptrdiff_t>(overlap),
                    a.keys.begin() + static_cast<std::ptrdiff_t>(s)))
      continue;
    if (a.complete && b.complete ? a.keys.size() - s == b.keys.size() : overlap >= 2) return s;
  }
  return std::nullopt;
}

std::string calls_text(uint64_t k, size_t n) {
  return n == 1 ? fmt::format("call #{}", k) : fmt::format("calls #{}-#{}", k, k + n - 1);
}

std::string fps_text(const Rest& r, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && i < r.calls.size(); ++i) s += (i ? "; " : "") + fp_text(*r.calls[i]);
  return s;
}

// The same shift on every rank of `side` against the first rank of `other`.
std::optional<size_t> shift_of(const Dumps& dumps, const std::vector<int>& side, int other, uint64_t k) {
  const RankDump* o = nullptr;
  for (const auto& d : dumps)
    if (d.rank == other) o = &d;
  if (!o) return std::nullopt;
  const Rest ro = rest_of(*o, k);
  std::optional<size_t> shift;
  for (const auto& d : dumps) {
    if (std::find(side.begin(), side.end(), d.rank) == side.end()) continue;
    const auto s = extra_calls(rest_of(d, k), ro);
    if (!s || (shift && *s != *shift)) return std::nullopt;
    shift = s;
  }
  return shift;
}

const RankDump* dump_of(const Dumps& dumps, int rank) {
  for (const auto& d : dumps)
    if (d.rank == rank) return &d;
  return nullptr;
}

// `extra` issued s calls at call #k that `other` did not; the text, and the
// caveat when there is no strict majority to say which side is wrong.
void extra_call(Diagnosis& d, uint64_t k, size_t s, const std::vector<int>& extra, const Rest& rextra,
                const std::vector<int>& other, const Rest& rother, bool majority) {
  d.kind = DiagnosisKind::ExtraCall;
  d.ranks = extra;
  d.text = fmt::format("{} issued {}, {} ({}), that {} did not: {}'s call #{} ({}) is {}'s call #{}, and the calls "
                       "after it agree again",
                       ranks_text(extra), s == 1 ? "an extra call" : fmt::format("{} extra calls", s), calls_text(k, s),
                       fps_text(rextra, s), ranks_text(other), ranks_text(other), k, fp_text(*rother.calls.front()),
                       ranks_text(extra), k + s);
  if (!majority)
    d.text += fmt::format(" (with no strict majority, {} skipping {} would look the same)", ranks_text(other),
                          s == 1 ? "it" : "them");
}

// An extra call on the odd ranks, or (with a strict majority that has them)
// calls that the odd ranks left out, into d; false when the sequences do not
// realign.
bool realign(const Dumps& dumps, uint64_t k, const std::vector<int>& ref, const std::vector<int>& odd,
             bool majority, Diagnosis& d) {
  const Rest rref = rest_of(*dump_of(dumps, ref.front()), k), rodd = rest_of(*dump_of(dumps, odd.front()), k);
  if (const auto s = shift_of(dumps, odd, ref.front(), k)) {
    extra_call(d, k, *s, odd, rodd, ref, rref, majority);
    return true;
  }
  const auto s = shift_of(dumps, ref, odd.front(), k);
  if (!s) return false;
  if (!majority) {
    extra_call(d, k, *s, ref, rref, odd, rodd, majority);
    return true;
  }
  d.kind = DiagnosisKind::SkippedCall;
  d.ranks = odd;
  d.text = fmt::format("{} skipped {} ({}) that {} made: {}'s call #{} ({}) is their call #{}, and the calls after "
                       "it agree again",
                       ranks_text(odd), calls_text(k, *s), fps_text(rref, *s), ranks_text(ref), ranks_text(odd), k,
                       fp_text(*rodd.calls.front()), k + *s);
  return true;
}

}  // namespace

// The first sequence number at which ranks disagree on the call.
std::optional<Diagnosis> mismatch(const Dumps& dumps) {
  for (const uint64_t k : seqs_in(dumps)) {
    std::map<Key, std::vector<int>> groups;
    std::map<Key, const CallRecord*> sample;
    for (const auto& d : dumps) {
      const CallRecord* c = call_of(d, k);
      if (!c) continue;
      const auto key = call_key(*c);
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
      if ((o.blocking_matters && o.async) != (r.blocking_matters && r.async)) fields.insert("blocking");
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
    if (groups.size() == 2) {
      const auto odd = std::next(groups.begin()) == ref ? groups.begin() : std::next(groups.begin());
      Diagnosis a = d;
      if (realign(dumps, k, ref->second, odd->second, 2 * ref->second.size() > reached, a)) {
        a.text += fmt::format("; at call #{} the calls differ in: {}", k, flist);
        return a;
      }
    }
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
