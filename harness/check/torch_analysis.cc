#include "harness/check/torch_analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "harness/check/detectors.h"

namespace collcheck {

namespace {

// Collectives whose input has one shape on every rank of the group
// (all_to_all, gather and scatter may differ).
bool same_shape_everywhere(const std::string& op) {
  const std::string c = torch_collective(op);
  return c == "all_reduce" || c == "broadcast" || c == "reduce" || c == "all_gather" || c == "reduce_scatter";
}

// What a call is, for comparing ranks: the collective (or the raw name when
// the reader does not know it), and the dtypes.
std::string what(const TorchEntry& e) {
  const std::string c = torch_collective(e.op);
  return (c.empty() ? e.op : c) + "|" + fmt::format("{}", fmt::join(e.input_dtypes, ",")) + "|" +
         torch_call_attributes(e.op);
}

// The attributes (op, root, nonblocking) two calls of one collective differ in.
void attribute_fields(const std::string& a, const std::string& b, std::set<std::string>& fields) {
  for (const char* key : {"op", "root"})
    if (torch_call_attribute(a, key) != torch_call_attribute(b, key)) fields.insert(key);
  if (torch_call_attributes(a).starts_with("nonblocking") != torch_call_attributes(b).starts_with("nonblocking"))
    fields.insert("blocking");
}

std::string ranks_only(const std::vector<int>& r) {
  std::string s = rank_ranges_text(r);
  return s.substr(s.find(' ') + 1);
}

// "12: #20536, 13-15: #20538": ranks with the same last collective together.
std::string last_text(const std::map<int, int64_t>& last) {
  std::map<int64_t, std::vector<int>> by;
  for (const auto& [r, s] : last) by[s].push_back(r);
  std::vector<std::pair<int, std::string>> parts;
  for (const auto& [s, ranks] : by) parts.emplace_back(ranks.front(), fmt::format("{}: #{}", ranks_only(ranks), s));
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const auto& [r, t] : parts) out += (out.empty() ? "" : ", ") + t;
  return out;
}

std::string site_text(const TorchEntry* e) {
  const std::string s = e ? torch_call_site(*e) : "";
  return s.empty() ? "" : " at " + s;
}

// The first sequence number of a group at which the ranks' collectives differ.
std::optional<Diagnosis> mismatch_in(const TorchGroupModel& g) {
  std::map<int64_t, std::vector<std::pair<int, const TorchEntry*>>> by_seq;
  for (const auto& [r, mine] : g.ranks)
    for (const auto& [seq, e] : mine.calls) by_seq[seq].emplace_back(r, e);
  for (const auto& [seq, calls] : by_seq) {
    if (calls.size() < 2) continue;
    std::map<std::string, std::vector<int>> groups;
    std::map<std::string, const TorchEntry*> sample;
    for (const auto& [r, e] : calls) {
      std::string key = what(*e);
      if (same_shape_everywhere(e->op)) key += "|" + torch_entry_text(*e);
      groups[key].push_back(r);
      sample[key] = e;
    }
    if (groups.size() < 2) continue;
    const auto ref = majority_group(groups);
    const TorchEntry& r = *sample[ref->first];
    Diagnosis d;
    d.seq = static_cast<uint64_t>(seq);
    d.group = g.key;
    std::set<std::string> fields;
    std::string others;
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      if (it == ref) continue;
      d.ranks.insert(d.ranks.end(), it->second.begin(), it->second.end());
      const TorchEntry& o = *sample[it->first];
      const bool same_op = torch_collective(o.op) == torch_collective(r.op) && !torch_collective(o.op).empty();
      if (!same_op && o.op != r.op) fields.insert("collective");  // the replay's word for it
      if (o.input_dtypes != r.input_dtypes) fields.insert("dtype");
      if ((same_op || o.op == r.op) && o.input_sizes != r.input_sizes) fields.insert("count");
      if (same_op) attribute_fields(o.op, r.op, fields);
      others += fmt::format("; {} called {}{}", rank_ranges_text(it->second), torch_entry_text(o), site_text(&o));
    }
    std::sort(d.ranks.begin(), d.ranks.end());
    d.fields.assign(fields.begin(), fields.end());
    d.kind = fields.count("collective") ? DiagnosisKind::OrderMismatch : DiagnosisKind::ShapeMismatch;
    d.text = fmt::format("{} at call #{} of {}: {} called {}{}{} (differs in: {})",
                         d.kind == DiagnosisKind::OrderMismatch ? "collectives called in a different order"
                                                                : "mismatched shapes",
                         seq, torch_group_text(g), rank_ranges_text(ref->second), torch_entry_text(r), site_text(&r),
                         others, fmt::format("{}", fmt::join(d.fields, ", ")));
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

// The call a rank is blocked in: of its calls that had not ended when it was
// dumped, the one it issued first (a helper group's check stands for the call
// it checks).
struct Blocked {
  const TorchGroupModel* group;
  int64_t seq;
  const TorchEntry* entry;
};
std::map<int, Blocked> blocked_calls(const TorchJob& job) {
  std::map<int, Blocked> out;
  for (const auto& g : job.groups)
    for (const auto& [r, mine] : g.ranks)
      for (const auto& [seq, e] : mine.calls)
        if (!torch_entry_ended(*e) && (!out.count(r) || e->record_id < out.at(r).entry->record_id))
          out[r] = Blocked{&g, seq, e};
  return out;
}

// Ranks stuck in calls that wait on each other around a cycle, across groups.
// `inferred`: the members the cycle takes that the dumps do not list.
std::optional<Diagnosis> cycle(const TorchJob& job, std::map<std::string, std::vector<int>>& inferred) {
  const auto blocked = blocked_calls(job);
  std::map<int, std::vector<int>> edges;
  std::set<int> stuck;
  for (const auto& [r, b] : blocked) {
    if (b.group->helper) continue;
    stuck.insert(r);
    for (const auto& [q, theirs] : b.group->ranks)
      if (q != r && theirs.enqueued < b.seq) edges[r].push_back(q);
    // Every rank known to be in the group had issued the call: it waits on
    // members the dumps do not name (torch 2.14's Gloo pg_config). A rank
    // without a dump is the first suspect (no cycle then); else the ranks
    // with a dump that never recorded a call of the group.
    const bool absent = std::any_of(b.group->maybe_members.begin(), b.group->maybe_members.end(),
                                    [&](int q) { return !job.dumps.count(q); });
    if (!edges.count(r) && !absent)
      for (const int q : b.group->maybe_members)
        if (q != r && !b.group->ranks.count(q)) edges[r].push_back(q);
  }
  const std::vector<int> path = detect::find_wait_cycle(edges, stuck);
  if (path.empty()) return std::nullopt;
  Diagnosis d;
  d.kind = DiagnosisKind::Deadlock;
  d.ranks = path;
  std::sort(d.ranks.begin(), d.ranks.end());
  std::string chain, loop;
  for (size_t i = 0; i < path.size(); ++i) {
    const Blocked& b = blocked.at(path[i]);
    const int q = path[(i + 1) % path.size()];
    const bool guessed = !b.group->ranks.count(q);
    chain += fmt::format("{}rank {} waits in call #{} ({}) of {}{} for rank {}, which never issued it{}", i ? "; " : "",
                         path[i], b.seq, torch_entry_text(*b.entry), torch_group_text(*b.group), site_text(b.entry), q,
                         guessed ? fmt::format(" (the dumps do not list the group's members: rank {} recorded no call "
                                               "of it, and every rank that did had issued this one)",
                                               q)
                                 : "");
    loop += fmt::format("rank {} -> ", path[i]);
  }
  for (size_t i = 0; i < path.size(); ++i) {
    const Blocked& b = blocked.at(path[i]);
    const int q = path[(i + 1) % path.size()];
    if (!b.group->ranks.count(q)) inferred[b.group->key].push_back(q);
  }
  d.seq = static_cast<uint64_t>(blocked.at(path.front()).seq);
  d.group = blocked.at(path.front()).group->key;
  d.text = fmt::format("a wait-for cycle across process groups: {}rank {}: {}. Each rank runs its collectives in "
                       "the order it issued them, so none of them reaches the call another waits in",
                       loop, path.front(), chain);
  return d;
}

}  // namespace

std::string_view torch_outcome_name(TorchOutcome o) {
  switch (o) {
    case TorchOutcome::Diagnosis: return "diagnosis";
    case TorchOutcome::Clean: return "clean";
    case TorchOutcome::Undecided: return "cannot decide";
  }
  return "?";
}

TorchAnalysis analyze_torch(const std::vector<TorchDump>& dumps, std::optional<int> world_size) {
  const TorchJob job = torch_job(dumps, world_size);
  TorchAnalysis out;
  out.world = job.world;
  out.world_known = job.world_known;
  out.notes = job.notes;
  if (!job.world_known)
    out.undecided.push_back(fmt::format("the dumps do not say how many ranks the job had; ranks {} left dumps (pass "
                                        "--world-size N if there were more)",
                                        ranks_only([&] {
                                          std::vector<int> v;
                                          for (const auto& [r, _] : job.dumps) v.push_back(r);
                                          return v;
                                        }())));
  const std::set<int> no_dump(job.no_dump.begin(), job.no_dump.end());
  for (const int r : job.empty) {
    std::string said;
    for (const auto& g : job.groups)
      if (const auto it = g.ranks.find(r); it != g.ranks.end() && it->second.enqueued > 0)
        said += fmt::format("{}{} up to #{}", said.empty() ? "" : ", ", torch_group_text(g), it->second.enqueued);
    out.notes.push_back(said.empty()
                            ? fmt::format("rank {}'s buffer is empty and its pg_status names no collective: it had "
                                          "issued none when it was dumped",
                                          r)
                            : fmt::format("rank {}'s buffer is empty; pg_status says it enqueued {}", r, said));
  }

  // DETAIL's wrapper checks each call's fingerprint before it issues it, and
  // a check that has not ended is not in the dump (real torch 2.14 dumps: a
  // rank stuck in the check of a barrier shows no call of the barrier's group
  // at all). Every recorded call having ended is then no proof that no rank
  // was stuck: these dumps are never called clean.
  if (job.detail)
    out.undecided.push_back("the dumps were taken with TORCH_DISTRIBUTED_DEBUG=DETAIL, whose fingerprint check of a "
                            "call is not recorded until it ends: a rank stuck in one looks finished, so a clean "
                            "verdict cannot be given");
  std::vector<Diagnosis> mismatches, missing;
  std::set<int> named;  // ranks some finding names
  for (const auto& g : job.groups) {
    if (g.helper) {
      // DETAIL's wrapper gathers a call's fingerprint, then issues the call:
      // a rank inside the check is blocked there; a check that ended with no
      // call after it is where the wrapper raised on a mismatch.
      std::vector<int> raised;
      const TorchEntry* check = nullptr;
      for (const auto& [r, mine] : g.ranks) {
        if (mine.calls.empty()) continue;
        const auto it = std::prev(mine.calls.end());
        if (!torch_entry_ended(*it->second)) {
          out.undecided.push_back(fmt::format(
              "rank {} was inside TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprint check ({} all_gather #{}) of the call "
              "it made{}, which waits for every rank of the group to make a call",
              r, g.key, it->first, site_text(it->second)));
          continue;
        }
        uint64_t last_real = 0;
        bool any_real = false;
        for (const auto& o : job.groups)
          if (!o.helper)
            if (const auto m = o.ranks.find(r); m != o.ranks.end())
              for (const auto& [seq, e] : m->second.calls) last_real = std::max(last_real, e->record_id), any_real = true;
        if (!any_real || it->second->record_id > last_real) raised.push_back(r), check = it->second;
      }
      if (!raised.empty())
        out.undecided.push_back(fmt::format(
            "TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprint check of the call{} ended on {}, and none of them issued "
            "that call: the wrapper raised, which it does when the ranks' calls differ (its RuntimeError in the "
            "ranks' logs names them; the dumps do not hold the fingerprints)",
            site_text(check), rank_ranges_text(raised)));
      continue;
    }
    if (auto m = mismatch_in(g)) mismatches.push_back(*m);
    if (g.ranks.empty()) continue;
    TorchGroupLag lag;
    lag.name = g.key;
    lag.desc = g.desc;
    lag.ranks = g.members;
    for (const auto& [r, mine] : g.ranks) lag.last[r] = mine.enqueued;
    int64_t lo = INT64_MAX, hi = 0;
    for (const auto& [r, s] : lag.last) lo = std::min(lo, s), hi = std::max(hi, s);
    if (hi == 0) continue;  // no rank issued a call of it
    std::vector<int> absent;  // members without a dump (or ranks that may be members, when the dumps do not say)
    for (const int r : g.maybe_members)
      if (no_dump.count(r)) absent.push_back(r);
    const int64_t stuck_seq = lo == hi ? hi : lo + 1;
    for (const auto& [r, s] : lag.last) (s == lo && lo != hi ? lag.missing : lag.joined).push_back(r);
    // The joined ranks' records of the stuck collective: entered when, ended or not.
    bool unended = false, recorded = false;
    lag.entered_ns = INT64_MAX;
    for (const int r : lag.joined) {
      const TorchRankInGroup& mine = g.ranks.at(r);
      if (mine.ended < stuck_seq) unended = true;
      if (const auto it = mine.calls.find(stuck_seq); it != mine.calls.end()) {
        if (!recorded) lag.stuck = *it->second;
        recorded = true;
        lag.entered_ns = std::min(lag.entered_ns, it->second->created_ns);
      }
    }
    lag.stuck_seq = stuck_seq;
    const std::string call = lag.stuck ? fmt::format("{}{}", torch_entry_text(*lag.stuck), site_text(&*lag.stuck))
                                       : "not in the joined ranks' trace buffers";
    if (lo == hi) {  // every member with a dump issued the same last call
      if (absent.empty()) {
        if (unended)
          out.in_flight.push_back(fmt::format("{}: call #{} ({}) had not ended on {} when they were dumped, though "
                                              "{} had issued it",
                                              torch_group_text(g), hi, call, rank_ranges_text(lag.joined),
                                              g.members_from.starts_with("the ranks")
                                                  ? "every rank known to be a member (the dumps do not list them)"
                                                  : "every member"));
        continue;
      }
      if (!unended) {
        out.undecided.push_back(fmt::format(
            "{} left no dump{}; {} ({}) last issued call #{} ({}), which they recorded as ended{}",
            rank_ranges_text(absent),
            g.members_from.starts_with("the ranks") ? " and may be in " + torch_group_text(g) + ", whose members the dumps do not list"
                                                    : "",
            g.members_from.starts_with("the ranks") ? "its known members" : "the other members of " + torch_group_text(g),
            ranks_only(lag.joined), hi, call,
            job.gloo ? " (Gloo records a call that failed, a timeout or a closed connection, as ended too)" : ""));
        named.insert(absent.begin(), absent.end());
        continue;
      }
      lag.missing = absent;  // the only members that can be holding the call
    }
    if (recorded && !unended && !job.gloo && lo != hi) {
      out.undecided.push_back(fmt::format("{}: {} completed call #{} without {}; the dumps were taken at different "
                                          "moments, not judged",
                                          torch_group_text(g), rank_ranges_text(lag.joined), stuck_seq,
                                          rank_ranges_text(lag.missing)));
      continue;
    }
    Diagnosis d;
    d.kind = DiagnosisKind::MissingRank;
    d.seq = static_cast<uint64_t>(stuck_seq);
    d.group = g.key;
    d.ranks = lag.missing;
    std::string whose;
    for (const int r : lag.missing) {
      if (no_dump.count(r)) {
        whose += fmt::format("; rank {} left no dump", r);
      } else if (std::find(job.empty.begin(), job.empty.end(), r) != job.empty.end()) {
        whose += fmt::format("; rank {}'s buffer is empty{}", r,
                             g.ranks.at(r).enqueued ? fmt::format(" (pg_status: up to #{})", g.ranks.at(r).enqueued)
                                                    : " (it had issued no collective)");
      } else if (const auto& mine = g.ranks.at(r); mine.calls.count(mine.enqueued)) {
        whose += fmt::format("; rank {}'s last call of it: #{}{}", r, mine.enqueued, site_text(mine.calls.at(mine.enqueued)));
      }
    }
    d.text = fmt::format("{} never joined call #{} ({}) of {}, which {} joined and could not finish{}; last collective "
                         "per rank: {}{}",
                         rank_ranges_text(lag.missing), stuck_seq, call, torch_group_text(g),
                         rank_ranges_text(lag.joined), whose, last_text(lag.last),
                         job.gloo && !unended ? ". Gloo recorded the call as ended on the ranks that joined it: a call "
                                                "that fails (a timeout, a closed connection) is recorded so too"
                                              : "");
    named.insert(lag.missing.begin(), lag.missing.end());
    out.lags.push_back(std::move(lag));
    missing.push_back(std::move(d));
  }
  // Keep the rows and their findings in one order: the earliest entered first.
  std::vector<size_t> order(out.lags.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  // Blame goes upstream: a group with a missing rank that is blocked in
  // another call (waiting on someone else) comes after the groups whose
  // missing ranks are not (as in a replay's diagnosis); then the earliest
  // entered first.
  const auto blocked = blocked_calls(job);
  auto downstream = [&](const TorchGroupLag& l) {
    return std::any_of(l.missing.begin(), l.missing.end(), [&](int r) {
      const auto b = blocked.find(r);
      return b != blocked.end() && !b->second.group->helper;
    });
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool da = downstream(out.lags[a]), db = downstream(out.lags[b]);
    return da != db ? db : out.lags[a].entered_ns < out.lags[b].entered_ns;
  });
  std::vector<TorchGroupLag> lags;
  out.diagnoses = std::move(mismatches);
  if (auto c = cycle(job, out.inferred_members)) out.diagnoses.push_back(*c);
  for (size_t k = 0; k < order.size(); ++k) {
    lags.push_back(std::move(out.lags[order[k]]));
    Diagnosis d = std::move(missing[order[k]]);
    if (k == 0 && order.size() > 1)
      d.text += fmt::format("; first of the {} groups stuck on missing ranks (its missing ranks wait on no one else, "
                            "and it was entered first): where the job stopped",
                            order.size());
    out.diagnoses.push_back(std::move(d));
  }
  out.lags = std::move(lags);
  for (const auto& d : out.diagnoses) named.insert(d.ranks.begin(), d.ranks.end());
  for (const int r : job.no_dump)
    if (!named.count(r)) out.undecided.push_back(fmt::format("rank {} left no dump", r));
  for (const auto& g : job.groups)
    if (!g.members_complete && !g.helper && !g.is_default() && !job.no_dump.empty())
      out.notes.push_back(fmt::format("{}: its members are not known (taken from {}: {}); a rank without a dump may "
                                      "be one too",
                                      torch_group_text(g), g.members_from, ranks_only(g.members)));
  add_mpi_p2p_findings(dumps, out);
  add_mpi_order_findings(dumps, out);
  if (out.diagnoses.empty()) out.undecided.insert(out.undecided.end(), out.in_flight.begin(), out.in_flight.end());
  out.outcome = !out.diagnoses.empty() ? TorchOutcome::Diagnosis
                : !out.undecided.empty() ? TorchOutcome::Undecided
                                         : TorchOutcome::Clean;
  if (out.outcome == TorchOutcome::Clean && job.gloo)
    out.notes.push_back("Gloo's Flight Recorder does not record send and recv: a hang inside them shows only as a "
                        "rank missing from the next collective");
  return out;
}

}  // namespace collcheck
