#include "harness/check/torch_analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace collcheck {

namespace {

// Collectives whose input has one shape on every rank of the group
// (all_to_all and the coalesced and uneven variants may differ).
bool same_shape_everywhere(const std::string& op) {
  const std::string o = op.starts_with("nccl:") ? op.substr(5) : op;
  for (const char* name : {"all_reduce", "allreduce", "broadcast", "reduce", "_reduce_scatter_base", "reduce_scatter",
                           "reduce_scatter_tensor", "_all_gather_base", "all_gather", "all_gather_into_tensor"})
    if (o == name) return true;
  return false;
}

std::string group_text(const std::string& name, const std::string& desc) {
  return desc.empty() ? fmt::format("process group {}", name) : fmt::format("process group {} ({})", name, desc);
}

// "12: #20536, 13-15: #20538": ranks with the same last collective together.
std::string last_text(const std::map<int, int64_t>& last) {
  std::map<int64_t, std::vector<int>> by;
  for (const auto& [r, s] : last) by[s].push_back(r);
  std::vector<std::pair<int, std::string>> parts;
  for (const auto& [s, ranks] : by) {
    std::string rs = rank_ranges_text(ranks);
    rs = rs.substr(rs.find(' ') + 1);
    parts.emplace_back(ranks.front(), fmt::format("{}: #{}", rs, s));
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const auto& [r, t] : parts) out += (out.empty() ? "" : ", ") + t;
  return out;
}

// The first sequence number of a group at which the ranks' collectives differ.
std::optional<Diagnosis> mismatch_in(const std::string& name, const std::string& desc,
                                     const std::map<int64_t, std::vector<std::pair<int, const TorchEntry*>>>& by_seq) {
  for (const auto& [seq, calls] : by_seq) {
    if (calls.size() < 2) continue;
    // The same collective: op, dtypes, and the shape where it must agree.
    std::map<std::string, std::vector<int>> groups;
    std::map<std::string, const TorchEntry*> sample;
    for (const auto& [r, e] : calls) {
      std::string key = e->op + "|" + fmt::format("{}", fmt::join(e->input_dtypes, ","));
      if (same_shape_everywhere(e->op)) key += "|" + torch_entry_text(*e);
      groups[key].push_back(r);
      sample[key] = e;
    }
    if (groups.size() < 2) continue;
    const auto ref = majority_group(groups);
    const TorchEntry& r = *sample[ref->first];
    Diagnosis d;
    d.seq = static_cast<uint64_t>(seq);
    d.group = name;
    std::set<std::string> fields;
    std::string others;
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      if (it == ref) continue;
      d.ranks.insert(d.ranks.end(), it->second.begin(), it->second.end());
      const TorchEntry& o = *sample[it->first];
      if (o.op != r.op) fields.insert("op");
      if (o.input_dtypes != r.input_dtypes) fields.insert("dtype");
      if (o.op == r.op && o.input_sizes != r.input_sizes) fields.insert("count");
      others += fmt::format("; {} called {}", rank_ranges_text(it->second), torch_entry_text(o));
    }
    std::sort(d.ranks.begin(), d.ranks.end());
    d.fields.assign(fields.begin(), fields.end());
    d.kind = fields.count("op") ? DiagnosisKind::OrderMismatch : DiagnosisKind::ShapeMismatch;
    d.text = fmt::format("{} at call #{} of {}: {} called {}{} (differs in: {})",
                         d.kind == DiagnosisKind::OrderMismatch ? "collectives called in a different order"
                                                                : "mismatched shapes",
                         seq, group_text(name, desc), rank_ranges_text(ref->second), torch_entry_text(r), others,
                         fmt::format("{}", fmt::join(d.fields, ", ")));
    size_t reached = 0;
    for (const auto& [key, ranks] : groups) reached += ranks.size();
    if (2 * ref->second.size() <= reached)
      d.text += fmt::format("; no strict majority ({} ranks recorded call #{}), so the side with the lowest rank was "
                            "taken as the reference",
                            reached, seq);
    return d;
  }
  return std::nullopt;
}

}  // namespace

TorchAnalysis analyze_torch(const std::vector<TorchDump>& dumps) {
  TorchAnalysis out;
  std::map<int, const TorchDump*> by_rank;
  for (const auto& d : dumps) by_rank[d.rank] = &d;
  // Every group any dump names, with its ranks; dumps that disagree are said.
  std::map<std::string, TorchGroup> groups;
  for (const auto& d : dumps)
    for (const auto& [name, g] : d.groups) {
      auto [it, fresh] = groups.emplace(name, g);
      if (!fresh && it->second.ranks != g.ranks)
        out.notes.push_back(fmt::format("{}: the dumps disagree on its ranks ({} in one, {} in {})",
                                        group_text(name, g.desc), rank_ranges_text(it->second.ranks),
                                        rank_ranges_text(g.ranks), d.file));
    }

  std::vector<Diagnosis> mismatches;
  for (const auto& [name, g] : groups) {
    if (g.ranks.size() < 2) continue;
    std::map<int64_t, std::vector<std::pair<int, const TorchEntry*>>> by_seq;
    TorchGroupLag lag;
    lag.name = name;
    lag.desc = g.desc;
    lag.ranks = g.ranks;
    std::vector<int> no_dump, no_entry;
    for (const int r : g.ranks) {
      const auto it = by_rank.find(r);
      if (it == by_rank.end()) {
        no_dump.push_back(r);
        continue;
      }
      bool any = false;
      for (const auto& e : it->second->entries) {
        if (e.pg_name != name || e.p2p) continue;
        any = true;
        by_seq[e.collective_seq].emplace_back(r, &e);
        lag.last[r] = std::max(lag.last.count(r) ? lag.last[r] : 0, e.collective_seq);
        if (lag.desc.empty()) lag.desc = e.pg_desc;
      }
      if (!any) no_entry.push_back(r);
    }
    if (lag.last.empty()) continue;  // no collective of this group in any buffer
    if (auto m = mismatch_in(name, lag.desc, by_seq)) mismatches.push_back(*m);
    int64_t lo = INT64_MAX, hi = 0;
    for (const auto& [r, s] : lag.last) lo = std::min(lo, s), hi = std::max(hi, s);
    if (lo == hi) continue;
    lag.stuck_seq = lo + 1;
    for (const auto& [r, s] : lag.last) (s == lo ? lag.missing : lag.joined).push_back(r);
    // The joined ranks' records of the stuck collective: entered when, finished or not.
    bool unfinished = false, recorded = false;
    lag.entered_ns = INT64_MAX;
    // The collective as the lowest joined rank recorded it (an all_to_all's
    // sizes differ per rank), entered when the first joined rank entered it.
    for (const auto& [r, e] : by_seq[lag.stuck_seq]) {
      if (!recorded) lag.stuck = *e;
      recorded = true;
      if (e->state != "completed") unfinished = true;
      lag.entered_ns = std::min(lag.entered_ns, e->created_ns);
    }
    if (recorded && !unfinished) {
      out.notes.push_back(fmt::format("{}: {} completed call #{} without {}; the dumps were taken at different "
                                      "moments, not judged",
                                      group_text(name, lag.desc), rank_ranges_text(lag.joined), lag.stuck_seq,
                                      rank_ranges_text(lag.missing)));
      continue;
    }
    if (!no_dump.empty())
      out.notes.push_back(fmt::format("{}: no dump from {}, which may be missing too", group_text(name, lag.desc),
                                      rank_ranges_text(no_dump)));
    if (!no_entry.empty())
      out.notes.push_back(fmt::format("{}: {} recorded none of its collectives (out of the trace buffer), not judged",
                                      group_text(name, lag.desc), rank_ranges_text(no_entry)));
    out.lags.push_back(std::move(lag));
  }
  std::stable_sort(out.lags.begin(), out.lags.end(),
                   [](const TorchGroupLag& a, const TorchGroupLag& b) { return a.entered_ns < b.entered_ns; });
  out.diagnoses = std::move(mismatches);
  for (size_t k = 0; k < out.lags.size(); ++k) {
    const auto& lag = out.lags[k];
    Diagnosis d;
    d.kind = DiagnosisKind::MissingRank;
    d.seq = static_cast<uint64_t>(lag.stuck_seq);
    d.group = lag.name;
    d.ranks = lag.missing;
    d.text = fmt::format("{} never joined call #{} ({}) of {}, which {} joined and could not finish; last collective "
                         "per rank: {}",
                         rank_ranges_text(lag.missing), lag.stuck_seq,
                         lag.stuck ? torch_entry_text(*lag.stuck) : "not in the joined ranks' trace buffers",
                         group_text(lag.name, lag.desc), rank_ranges_text(lag.joined), last_text(lag.last));
    if (k == 0 && out.lags.size() > 1)
      d.text += fmt::format("; entered first of the {} groups stuck on missing ranks: where the job stopped",
                            out.lags.size());
    out.diagnoses.push_back(std::move(d));
  }
  return out;
}

}  // namespace collcheck
