// Ranks waiting on each other in a cycle.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "harness/check/detectors.h"

namespace collcheck::detect {

// Ranks blocked on each other in a cycle (each in a call the others have not reached or left).
// A wait that began after the first call gave up is a consequence of that
// failure (a stream that moved on to its next call once the stuck one failed),
// not a cause: it is left out.
std::optional<Diagnosis> deadlock(const Dumps& dumps) {
  double gave_up = std::numeric_limits<double>::infinity();
  for (const auto& d : dumps)
    for (const auto& c : d.calls)
      if (c.state == CallState::Failed && c.t_completed >= 0) gave_up = std::min(gave_up, c.t_completed);
  std::map<int, int> waits_on;
  for (const auto& d : dumps)
    if (d.blocked_on.blocked && !(d.blocked_on.since >= gave_up)) waits_on[d.rank] = d.blocked_on.peer;
  for (const auto& [start, _] : waits_on) {
    std::vector<int> path{start};
    int cur = start;
    while (waits_on.count(cur)) {
      cur = waits_on[cur];
      auto it = std::find(path.begin(), path.end(), cur);
      if (it != path.end()) {
        Diagnosis dg;
        dg.kind = DiagnosisKind::Deadlock;
        dg.ranks.assign(it, path.end());
        std::sort(dg.ranks.begin(), dg.ranks.end());
        std::string chain;
        for (auto x = it; x != path.end(); ++x) chain += fmt::format("rank {} -> ", *x);
        dg.text = fmt::format("a wait-for cycle: {}rank {}", chain, cur);
        return dg;
      }
      path.push_back(cur);
    }
  }
  return std::nullopt;
}

namespace {
struct Stuck {
  const RankDump* dump;  // the communicator's dump that holds the call
  const CallRecord* call;
};

// The call a rank was blocked in at time t (the moment the first call gave up):
// of the calls it had entered by then and not finished, the one it entered first.
std::optional<Stuck> stuck_call(const std::vector<const RankDump*>& mine, double t) {
  std::optional<Stuck> s;
  for (const RankDump* d : mine)
    for (const auto& c : d->calls)
      if (c.t_started >= 0 && c.t_started < t && (c.t_completed < 0 || c.t_completed >= t) &&
          (!s || c.t_started < s->call->t_started))
        s = Stuck{d, &c};
  return s;
}

// The n-th point-to-point call of `dump` with this collective and peer (n from 1).
const CallRecord* nth_p2p(const RankDump& dump, Collective coll, int peer, size_t n) {
  for (const auto& c : dump.calls)
    if (c.coll == coll && c.peer == peer && --n == 0) return &c;
  return nullptr;
}
size_t p2p_index(const RankDump& dump, const CallRecord& call) {
  size_t n = 0;
  for (const auto& c : dump.calls) {
    if (c.coll == call.coll && c.peer == call.peer) ++n;
    if (&c == &call) return n;
  }
  return 0;
}

std::string where(const RankDump& d, const CallRecord& c) {
  const std::string g = d.group.empty() ? "the world" : "group " + d.group;
  if (is_p2p(c.coll))
    return fmt::format("{} {} message #{} {} rank {} ({})", g, collective_name(c.coll), p2p_index(d, c),
                       c.coll == Collective::Send ? "to" : "from", c.peer, c.tag);
  return fmt::format("{}'s {} #{} ({})", g, collective_name(c.coll), c.seq, c.tag);
}
}  // namespace

// The first cycle among stuck ranks, walking from the lowest rank: an
// iterative depth-first search (a rank is on the stack while its edges are
// walked), O(ranks + edges), no recursion however many ranks a dump set has.
std::vector<int> find_wait_cycle(const std::map<int, std::vector<int>>& edges, const std::set<int>& stuck) {
  std::vector<int> path;
  enum Colour : uint8_t { White, Grey, Black };
  std::map<int, Colour> colour;
  for (const int root : stuck) {
    if (colour[root] != White || !path.empty()) continue;
    std::vector<std::pair<int, size_t>> stack{{root, 0}};  // rank, next edge to walk
    colour[root] = Grey;
    while (!stack.empty() && path.empty()) {
      auto& [u, next] = stack.back();
      const auto it = edges.find(u);
      if (it == edges.end() || next == it->second.size()) {
        colour[u] = Black;
        stack.pop_back();
        continue;
      }
      const int v = it->second[next++];
      if (!stuck.count(v)) continue;  // waits on a rank that is not stuck: a missing rank, not a cycle
      if (colour[v] == Grey) {        // back to a rank on the stack: the cycle is the stack from v
        size_t i = 0;
        while (stack[i].first != v) ++i;
        for (; i < stack.size(); ++i) path.push_back(stack[i].first);
      } else if (colour[v] == White) {
        colour[v] = Grey;
        stack.emplace_back(v, 0);
      }
    }
  }
  return path;
}

// Ranks each stuck in a call that waits on another rank, which is itself stuck
// elsewhere, around a cycle: across process groups (each rank runs its calls
// in the order it issued them, one device stream) and point-to-point calls.
// The picture is taken when the first call gave up (its deadline, or an
// error): rank r waits on rank q when r was inside a call then that q had not
// entered.
std::optional<Diagnosis> call_cycle(const Dumps& dumps) {
  double t = std::numeric_limits<double>::infinity();
  for (const auto& d : dumps)
    for (const auto& c : d.calls)
      if (c.state == CallState::Failed && c.t_completed >= 0) t = std::min(t, c.t_completed);
  std::map<int, std::vector<const RankDump*>> by_rank;
  for (const auto& d : dumps) by_rank[d.rank].push_back(&d);
  std::map<int, Stuck> stuck;
  for (const auto& [r, mine] : by_rank)
    if (auto s = stuck_call(mine, t)) stuck[r] = *s;
  auto dump_of = [&](int q, const std::string& group, bool p2p) -> const RankDump* {
    for (const RankDump* d : by_rank[q])
      if (d->group == group && d->p2p == p2p) return d;
    return nullptr;
  };
  // r waits on q when q had not entered the call r is in (theirs) by then.
  auto waits_on = [&](const CallRecord* theirs) { return !theirs || theirs->t_started < 0 || theirs->t_started >= t; };
  std::map<int, std::vector<int>> edges;
  // An edge r -> q where q had issued its side of the call, async, in a group
  // whose calls move only inside q's calls of it (progress: caller), and it
  // never started: q's call, for the text.
  std::map<std::pair<int, int>, std::pair<const RankDump*, const CallRecord*>> unmoved;
  auto note_unmoved = [&](int r, int q, const RankDump* other, const CallRecord* theirs) {
    if (other && other->caller_progress && theirs && theirs->t_scheduled >= 0 && theirs->t_scheduled < t &&
        theirs->t_started < 0)
      unmoved[{r, q}] = {other, theirs};
  };
  for (const auto& [r, s] : stuck) {
    const RankDump& d = *s.dump;
    const CallRecord& c = *s.call;
    if (is_p2p(c.coll)) {
      const int q = c.peer;
      const RankDump* other = dump_of(q, d.group, true);
      const Collective mirror = c.coll == Collective::Send ? Collective::Recv : Collective::Send;
      const CallRecord* theirs = other ? nth_p2p(*other, mirror, r, p2p_index(d, c)) : nullptr;
      if (waits_on(theirs)) {
        edges[r].push_back(q);
        note_unmoved(r, q, other, theirs);
      }
      continue;
    }
    std::vector<int> members = d.members;
    if (d.group.empty())
      for (const auto& [q, _] : by_rank) members.push_back(q);
    for (int q : members) {
      if (q == r) continue;
      const RankDump* other = dump_of(q, d.group, false);
      const CallRecord* theirs = other ? call_of(*other, c.seq) : nullptr;
      if (waits_on(theirs)) {
        edges[r].push_back(q);
        note_unmoved(r, q, other, theirs);
      }
    }
  }
  std::set<int> stuck_ranks;
  for (const auto& [r, _] : stuck) stuck_ranks.insert(r);
  const std::vector<int> path = find_wait_cycle(edges, stuck_ranks);
  if (!path.empty()) {
    Diagnosis dg;
    dg.kind = DiagnosisKind::Deadlock;
    dg.ranks = path;
    std::sort(dg.ranks.begin(), dg.ranks.end());
    std::string chain;
    bool progress_edge = false;
    for (size_t i = 0; i < path.size(); ++i) {
      const Stuck& s = stuck.at(path[i]);
      const int q = path[(i + 1) % path.size()];
      chain += fmt::format("{}rank {} waits in {} for rank {}", i ? "; " : "", path[i], where(*s.dump, *s.call), q);
      if (const auto it = unmoved.find({path[i], q}); it != unmoved.end()) {
        progress_edge = true;
        const auto& [od, oc] = it->second;
        const std::string g = od->group.empty() ? "the world" : "group " + od->group;
        chain += fmt::format(", whose {} (async, issued at {:.3f} s) never started: {} moves async calls only while "
                             "rank {} is inside one of its calls (progress: caller), and rank {} was waiting in {}",
                             where(*od, *oc), oc->t_scheduled, g, q, q, where(*stuck.at(q).dump, *stuck.at(q).call));
      }
    }
    std::string cycle;
    for (int r : path) cycle += fmt::format("rank {} -> ", r);
    dg.text = fmt::format("a wait-for cycle: {}rank {}: {}. {}", cycle, path.front(), chain,
                          progress_edge ? "An async call of a library without a progress thread (MPI) moves only "
                                          "inside that library's calls: wait on it before blocking elsewhere"
                                        : "Each rank runs its calls in the order it issued them (one device stream), "
                                          "so none of them reaches the call another waits in");
    return dg;
  }
  return std::nullopt;
}

}  // namespace collcheck::detect
