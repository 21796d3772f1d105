#include "harness/report/diagnosis_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace collcheck {

std::string format_diagnosis(const Diagnosis& d) {
  std::string s = fmt::format("{}", diagnosis_name(d.kind));
  if (!d.ranks.empty()) s += fmt::format(" [{}]", ranks_text(d.ranks));
  if (d.seq) s += d.group.empty() ? fmt::format(" [call #{}]", *d.seq) : fmt::format(" [group {} call #{}]", d.group, *d.seq);
  if (d.edge) s += fmt::format(" [edge {} -> {}]", d.edge->first, d.edge->second);
  return s + ": " + d.text;
}

namespace {

// Large worlds fold: ranks whose calls (collective, tag, size, state) and
// blocked state are alike are printed once, under the ranges of their ranks,
// with the lowest rank's times. Up to kUnfolded ranks, every rank is printed.
constexpr size_t kUnfolded = 8;

std::string call_key(const CallRecord& c) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{};", c.seq, static_cast<int>(c.coll), c.tag, c.count,
                     static_cast<int>(c.dtype), static_cast<int>(c.op), c.async, static_cast<int>(c.state));
}

// The calls a failed program would have issued next (never run), as one
// line: what the analysis aligns the ranks' sequences with after a mismatch.
std::string not_run_text(const RankDump& d) {
  if (d.not_run.empty()) return "";
  constexpr size_t kShown = 4;
  std::string s;
  for (size_t i = 0; i < d.not_run.size() && i < kShown; ++i) {
    const auto& c = d.not_run[i];
    s += fmt::format("{}#{} {} {} {}", i ? ", " : "", c.seq, c.tag, c.count, dtype_name(c.dtype));
  }
  const size_t more = d.not_run.size() - std::min(d.not_run.size(), kShown);
  if (more || !d.rest_known) s += fmt::format(", {}", more ? fmt::format("{} more", more) : "more");
  return fmt::format("  {:<8} never run, the program's next calls: {}\n", "", s);
}

// rank -> the ranks it stands for (only the first rank of each fold is a key).
std::map<int, std::vector<int>> folds(const std::map<int, std::string>& keys) {
  std::map<int, std::vector<int>> out;
  std::map<std::string, int> first;
  for (const auto& [rank, key] : keys) {
    if (keys.size() <= kUnfolded) {
      out[rank] = {rank};
      continue;
    }
    auto [it, fresh] = first.emplace(key, rank);
    out[it->second].push_back(rank);
  }
  return out;
}

// The timeline's "seconds from the start", and whose clock (MPI processes,
// harness/world/mpi_clock.h): "" where every rank ran in one process.
std::string timeline_heading(const std::vector<RankDump>& dumps, const char* legend) {
  std::set<int> estimated, noted;
  double within = 0;
  for (const auto& d : dumps) {
    if (d.clock_aligned.empty()) continue;
    noted.insert(d.rank);
    if (d.clock_aligned == "shared clock") continue;
    estimated.insert(d.rank);
    within = std::max(within, d.clock_uncertainty_s);
  }
  std::string clock;
  if (!estimated.empty())
    clock = fmt::format(" on rank 0's clock; {} aligned to it by ping-pong, to within {:.3f} ms",
                        rank_ranges_text(std::vector<int>(estimated.begin(), estimated.end())), within * 1e3);
  else if (!noted.empty())
    clock = " on rank 0's clock, which every process reads";
  return fmt::format("timeline (seconds from the start{}; {}):\n", clock, legend);
}

std::string fold_header(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return "";
  return fmt::format("  {} ({} ranks alike: the same calls and states; rank {}'s times):\n", rank_ranges_text(ranks),
                     ranks.size(), ranks.front());
}

// The timeline of a run with process groups or point-to-point calls: each
// rank's calls of every communicator in the order it issued them, named by
// group and collective.
std::string groups_timeline(const std::vector<RankDump>& dumps) {
  std::string s = timeline_heading(dumps, "B began, D done, W waited; calls by group, in issue order");
  std::map<int, std::vector<std::pair<const RankDump*, const CallRecord*>>> by_rank;
  std::map<int, const RankDump*> blocked;
  for (const auto& d : dumps) {
    by_rank[d.rank];
    for (const auto& c : d.calls) by_rank[d.rank].emplace_back(&d, &c);
    if (d.blocked_on.blocked) blocked[d.rank] = &d;
  }
  constexpr size_t kHead = 4, kTail = 20;
  std::map<int, std::string> keys;
  for (auto& [rank, calls] : by_rank) {
    std::stable_sort(calls.begin(), calls.end(),
                     [](const auto& a, const auto& b) { return a.second->t_scheduled < b.second->t_scheduled; });
    std::string& k = keys[rank];
    for (const auto& [d, c] : calls) k += d->group + (d->p2p ? "p2p|" : "|") + std::to_string(c->peer) + call_key(*c);
    if (auto it = blocked.find(rank); it != blocked.end()) k += it->second->blocked_on.send ? "blocked send" : "blocked recv";
  }
  const auto fold = folds(keys);
  for (auto& [rank, calls] : by_rank) {
    const auto f = fold.find(rank);
    if (f == fold.end()) continue;  // printed with the first rank of its fold
    s += fold_header(f->second);
    bool first = f->second.size() == 1;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (calls.size() > kHead + kTail + 1 && i == kHead) {
        s += fmt::format("  {:<8} ... {} calls not shown ...\n", "", calls.size() - kHead - kTail);
        i = calls.size() - kTail;
      }
      const auto& [d, c] = calls[i];
      std::string times;
      if (c->t_started >= 0) times += fmt::format(" B {:.3f}", c->t_started);
      if (c->t_completed >= 0) times += fmt::format(" D {:.3f}", c->t_completed);
      if (c->t_waited >= 0) times += fmt::format(" W {:.3f}", c->t_waited);
      std::string state = std::string(call_state_name(c->state));
      if (c->state == CallState::Failed) state += ": " + (c->error.size() > 70 ? c->error.substr(0, 67) + "..." : c->error);
      const std::string where = fmt::format("{}{}#{}", d->group.empty() ? "world" : d->group, d->p2p ? " p2p " : " ", c->seq);
      std::string what = std::string(collective_name(c->coll));
      if (c->coll == Collective::Broadcast) what += fmt::format(" root {}", c->peer);
      if (is_p2p(c->coll)) what += fmt::format(" {} {}", c->coll == Collective::Send ? "to" : "from", c->peer);
      s += fmt::format("  {:<8} {:<14} {:<18} {:<14} {:>7} {:<8} {:<5}{:<26} {}\n", first ? fmt::format("rank {}", rank) : "",
                       where.size() > 14 ? where.substr(0, 13) + "~" : where, what,
                       c->tag.size() > 14 ? c->tag.substr(0, 13) + "~" : c->tag, c->count, dtype_name(c->dtype),
                       c->async ? "async" : "", times, state);
      first = false;
    }
    if (calls.empty()) s += fmt::format("  {:<8} (no calls)\n", first ? fmt::format("rank {}", rank) : "");
    if (auto it = blocked.find(rank); it != blocked.end()) {
      const BlockedOn& b = it->second->blocked_on;
      s += fmt::format("  {:<8} blocked on {} rank {}, {}, since {:.3f}\n", "", b.send ? "send to" : "recv from", b.peer,
                       describe_tag(b.tag), b.since);
    }
  }
  return s;
}
}  // namespace

std::string format_timeline(const std::vector<RankDump>& dumps) {
  if (std::any_of(dumps.begin(), dumps.end(), [](const RankDump& d) { return !d.group.empty() || d.p2p; }))
    return groups_timeline(dumps);
  std::string s = timeline_heading(dumps, "B began, D done, W waited");
  // Bounded: a long run shows each rank's first calls and its last ones
  // (where a hang or a failure is), with how many are left out between.
  constexpr size_t kHead = 4, kTail = 20;
  std::map<int, std::string> keys;
  for (const auto& d : dumps) {
    std::string& k = keys[d.rank];
    for (const auto& c : d.calls) k += call_key(c);
    for (const auto& c : d.not_run) k += "next" + call_key(c);
    if (d.blocked_on.blocked) k += d.blocked_on.send ? "blocked send" : "blocked recv";
  }
  const auto fold = folds(keys);
  for (const auto& d : dumps) {
    const auto f = fold.find(d.rank);
    if (f == fold.end()) continue;  // printed with the first rank of its fold
    s += fold_header(f->second);
    bool first = f->second.size() == 1;
    for (size_t i = 0; i < d.calls.size(); ++i) {
      if (d.calls.size() > kHead + kTail + 1 && i == kHead) {
        s += fmt::format("  {:<8} ... {} calls not shown ...\n", "", d.calls.size() - kHead - kTail);
        i = d.calls.size() - kTail;
      }
      const CallRecord& c = d.calls[i];
      std::string times;
      if (c.t_started >= 0) times += fmt::format(" B {:.3f}", c.t_started);
      if (c.t_completed >= 0) times += fmt::format(" D {:.3f}", c.t_completed);
      if (c.t_waited >= 0) times += fmt::format(" W {:.3f}", c.t_waited);
      std::string state = std::string(call_state_name(c.state));
      if (c.state == CallState::Failed) state += ": " + (c.error.size() > 90 ? c.error.substr(0, 87) + "..." : c.error);
      s += fmt::format("  {:<8} #{:<3} {:<14} {:>7} {:<8} {:<9} {:<5}{:<26} {}\n",
                       first ? fmt::format("rank {}", d.rank) : "", c.seq,
                       c.tag.size() > 14 ? c.tag.substr(0, 13) + "~" : c.tag, c.count, dtype_name(c.dtype),
                       op_name(c.op), c.async ? "async" : "", times, state);
      first = false;
    }
    if (d.calls.empty()) s += fmt::format("  {:<8} (no calls)\n", first ? fmt::format("rank {}", d.rank) : "");
    if (d.blocked_on.blocked)
      s += fmt::format("  {:<8} blocked on {} rank {}, {}, since {:.3f}\n", "", d.blocked_on.send ? "send to" : "recv from",
                       d.blocked_on.peer, describe_tag(d.blocked_on.tag), d.blocked_on.since);
    s += not_run_text(d);
  }
  return s;
}

}  // namespace collcheck
