#include "harness/check/detectors.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace collcheck::detect {

namespace {
// A detector with at most one finding, as a row of the table.
template <std::optional<Diagnosis> (*Find)(const Dumps&)>
void one(const Dumps& dumps, const AnalysisOptions&, std::vector<Diagnosis>& out) {
  if (auto d = Find(dumps)) out.push_back(*d);
}
}  // namespace

// The detectors of the rows, each in its file. Those with at most one finding
// return it, and the table adapts them (one<>).
std::optional<Diagnosis> mismatch(const Dumps&);      // detect_mismatch.cc
std::optional<Diagnosis> crash(const Dumps&);         // detect_crash.cc
std::optional<Diagnosis> missing_rank(const Dumps&);  // detect_missing_rank.cc
std::optional<Diagnosis> deadlock(const Dumps&);      // detect_deadlock.cc
void late_rank(const Dumps&, const AnalysisOptions&, std::vector<Diagnosis>&);          // detect_late_rank.cc
void hung_call(const Dumps&, const AnalysisOptions&, std::vector<Diagnosis>&);          // detect_hung_call.cc
void corrupted_payload(const Dumps&, const AnalysisOptions&, std::vector<Diagnosis>&);  // detect_corrupted_payload.cc
void slow_link(const Dumps&, const AnalysisOptions&, std::vector<Diagnosis>&);          // detect_slow_link.cc
void call_failed(const Dumps&, const AnalysisOptions&, std::vector<Diagnosis>&);        // detect_call_failed.cc

const std::vector<Detector>& detectors() {
  using K = DiagnosisKind;
  // A mismatch is named first even when a rank then crashed (a mismatched
  // count can overrun a buffer); a crash explains ranks left waiting for it,
  // a late rank (one that came after the others gave up) the waits behind it,
  // and a missing rank the cycle of waits that follows.
  static const std::vector<Detector> rows{
      {"mismatch", one<mismatch>, {}},
      {"crash", one<crash>, {}},
      {"late rank", late_rank, {K::ShapeMismatch, K::OrderMismatch, K::ExtraCall, K::SkippedCall, K::RankCrashed}},
      {"missing rank", one<missing_rank>, {K::ShapeMismatch, K::OrderMismatch, K::ExtraCall, K::SkippedCall, K::RankCrashed, K::LateRank}},
      {"deadlock", one<deadlock>, {K::ShapeMismatch, K::OrderMismatch, K::ExtraCall, K::SkippedCall, K::RankCrashed, K::LateRank, K::MissingRank}},
      {"hung call", hung_call, {K::ShapeMismatch, K::OrderMismatch, K::ExtraCall, K::SkippedCall, K::RankCrashed, K::LateRank, K::MissingRank, K::Deadlock}},
      {"corrupted payload", corrupted_payload, {}},
      {"slow link", slow_link, {}},
      {"async work", async_work, {}},
      {"call failed", call_failed, {}, true},
  };
  return rows;
}

CallKey call_key(const CallRecord& c) {
  return std::make_tuple(c.tag, c.count, static_cast<int>(c.dtype), reduces(c.coll) ? static_cast<int>(c.op) : 0,
                         static_cast<int>(c.coll), c.peer, c.blocking_matters && c.async);
}

const CallRecord* call_of(const RankDump& d, uint64_t seq) {
  // A dump's calls are numbered one after another (checked when it is read).
  if (d.calls.empty() || seq < d.calls.front().seq) return nullptr;
  const uint64_t i = seq - d.calls.front().seq;
  if (i >= d.calls.size()) return nullptr;
  return d.calls[i].seq == seq ? &d.calls[i] : nullptr;
}

std::vector<uint64_t> seqs_in(const Dumps& dumps) {
  std::vector<uint64_t> s;
  for (const auto& d : dumps)
    for (const auto& c : d.calls) s.push_back(c.seq);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

uint64_t last_seq(const RankDump& d) { return d.calls.empty() ? 0 : d.calls.back().seq; }

bool finished(const CallRecord& c) { return c.state == CallState::Completed || c.state == CallState::Waited; }

uint64_t last_completed(const RankDump& d) {
  uint64_t s = 0;
  for (const auto& c : d.calls)
    if (c.state == CallState::Completed || c.state == CallState::Waited) s = std::max(s, c.seq);
  return s;
}

std::string last_completed_text(const Dumps& dumps) {
  std::string s;
  if (dumps.size() <= 8) {
    for (const auto& d : dumps) s += fmt::format("{}{}: #{}", s.empty() ? "" : ", ", d.rank, last_completed(d));
    return s;
  }
  // A large world: ranks with the same last call together, the most first.
  std::map<uint64_t, std::vector<int>> by;
  for (const auto& d : dumps) by[last_completed(d)].push_back(d.rank);
  std::vector<std::pair<uint64_t, std::vector<int>>> rows(by.begin(), by.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  for (const auto& [k, ranks] : rows) {
    std::string rs = rank_ranges_text(ranks);
    s += fmt::format("{}{}: #{}", s.empty() ? "" : "; ", rs.substr(rs.find(' ') + 1), k);
  }
  return s;
}

std::string fp_text(const CallRecord& c) {
  const char* form = c.blocking_matters ? (c.async ? " non-blocking" : " blocking") : "";
  if (c.coll == Collective::AllReduce)
    return fmt::format("{} count={} {} {}{}", c.tag, c.count, dtype_name(c.dtype), op_name(c.op), form);
  std::string s = fmt::format("{} {}", c.tag, collective_name(c.coll));
  if (c.coll == Collective::Broadcast) s += fmt::format(" root={}", c.peer);
  if (c.coll != Collective::Barrier) s += fmt::format(" count={} {}", c.count, dtype_name(c.dtype));
  if (reduces(c.coll)) s += fmt::format(" {}", op_name(c.op));
  return s + form;
}

TransferPairs transfer_pairs(const Dumps& dumps) {
  TransferPairs pairs;
  for (const auto& d : dumps) {
    for (const auto& t : d.transfers) {
      auto& p = pairs[{t.src, t.dst, t.tag, t.ordinal}];
      (t.send ? p.first : p.second) = &t;
    }
  }
  return pairs;
}

}  // namespace collcheck::detect
