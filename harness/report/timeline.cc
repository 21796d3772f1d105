#include "harness/report/timeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "harness/report/diagnosis_text.h"

namespace collcheck {

namespace {

std::string track_name(const RankDump& d) {
  std::string n = fmt::format("rank {}", d.rank);
  if (!d.group.empty()) n += " · group " + d.group;
  if (d.p2p) n += " · p2p";
  return n;
}

std::string call_name(const CallRecord& c) {
  std::string n = fmt::format("#{} {}", c.seq, collective_name(c.coll));
  if (!c.tag.empty()) n += " " + c.tag;
  return n;
}

std::vector<std::pair<std::string, std::string>> call_args(const CallRecord& c) {
  std::vector<std::pair<std::string, std::string>> a{
      {"count", std::to_string(c.count)}, {"dtype", std::string(dtype_name(c.dtype))},
      {"op", std::string(op_name(c.op))}, {"state", std::string(call_state_name(c.state))},
      {"async", c.async ? "yes" : "no"}};
  if (c.peer >= 0) a.emplace_back("peer", std::to_string(c.peer));
  if (!c.impl.empty()) a.emplace_back("impl", c.impl);
  if (c.t_scheduled >= 0) a.emplace_back("scheduled at (s)", fmt::format("{:.6f}", c.t_scheduled));
  if (!c.error.empty()) a.emplace_back("error", c.error);
  return a;
}

}  // namespace

TimelineRun timeline_of(std::string name, const std::vector<RankDump>& dumps, const std::vector<Diagnosis>& diagnoses,
                        double diagnosed_at, size_t max_transfers) {
  TimelineRun run;
  run.name = std::move(name);
  // Tracks in rank order, the world's collectives first.
  std::vector<const RankDump*> order;
  for (const auto& d : dumps) order.push_back(&d);
  std::stable_sort(order.begin(), order.end(), [](const RankDump* a, const RankDump* b) {
    return std::make_tuple(a->rank, !a->group.empty(), a->group, a->p2p) <
           std::make_tuple(b->rank, !b->group.empty(), b->group, b->p2p);
  });
  double last = 0;
  for (const RankDump* d : order) last = std::max(last, d->dumped_at);
  std::map<int, size_t> first_track;  // rank -> its first track
  size_t left_out = 0;
  for (const RankDump* d : order) {
    // A communicator the rank never used (its point-to-point calls, say)
    // gets no track.
    const bool first = !first_track.count(d->rank);
    if (!first && d->calls.empty() && d->transfers.empty() && !d->blocked_on.blocked) continue;
    const size_t t = run.tracks.size();
    run.tracks.push_back(track_name(*d));
    first_track.emplace(d->rank, t);
    const double end_of_dump = d->dumped_at >= 0 ? d->dumped_at : last;
    auto slice = [&](std::string n, std::string cat, double a, double b, bool overlaps,
                     std::vector<std::pair<std::string, std::string>> args = {}) {
      if (a < 0) return;
      run.slices.push_back({t, std::move(n), std::move(cat), a, std::max(a, b), overlaps, std::move(args)});
    };
    for (const CallRecord& c : d->calls) {
      if (c.t_started >= 0) {
        slice(call_name(c), "call", c.t_started, c.t_completed >= 0 ? c.t_completed : end_of_dump, false, call_args(c));
      } else if (c.t_scheduled >= 0 && c.state == CallState::Scheduled) {
        slice(call_name(c) + " (queued, never started)", "queued", c.t_scheduled, end_of_dump, true, call_args(c));
      }
      if (c.async && c.t_completed >= 0 && c.state != CallState::Failed)
        slice(fmt::format("#{} done, {}", c.seq, c.t_waited >= 0 ? "waiting for its wait()" : "wait() never made"),
              "wait", c.t_completed, c.t_waited >= 0 ? c.t_waited : end_of_dump, true);
    }
    const size_t skip = d->transfers.size() > max_transfers ? d->transfers.size() - max_transfers : 0;
    left_out += skip;
    for (size_t i = skip; i < d->transfers.size(); ++i) {
      const TransferRecord& x = d->transfers[i];
      slice(x.send ? fmt::format("send to rank {}", x.dst) : fmt::format("recv from rank {}", x.src), "transfer",
            x.t_posted, x.t_completed >= 0 ? x.t_completed : end_of_dump, true,
            {{"bytes", std::to_string(x.bytes)}, {"tag", fmt::format("{:#x}", x.tag)},
             {"completed", x.t_completed >= 0 ? "yes" : "no"}});
    }
    if (d->blocked_on.blocked)
      slice(fmt::format("blocked: {} rank {}", d->blocked_on.send ? "send to" : "recv from", d->blocked_on.peer), "blocked",
            d->blocked_on.since, end_of_dump, true, {{"tag", fmt::format("{:#x}", d->blocked_on.tag)}});
    // The process's stalls, once per rank (each of its dumps holds them).
    if (first)
      for (const Stall& st : d->stalls) slice("process not running", "stall", st.begin, st.end, true);
  }
  const double at = diagnosed_at >= 0 ? diagnosed_at : last;
  for (const Diagnosis& dg : diagnoses) {
    std::string n = std::string(diagnosis_name(dg.kind));
    if (!dg.ranks.empty()) n += fmt::format(" [rank{} {}]", dg.ranks.size() == 1 ? "" : "s", fmt::join(dg.ranks, ", "));
    if (dg.seq) n += fmt::format(" [call #{}]", *dg.seq);
    run.marks.push_back({std::nullopt, n, at, dg.text});
    for (const int r : dg.ranks)
      if (auto it = first_track.find(r); it != first_track.end()) run.marks.push_back({it->second, n, at, dg.text});
  }
  if (diagnoses.empty()) run.marks.push_back({std::nullopt, "diagnosis: none", at, "no finding"});
  if (left_out)
    run.marks.push_back({std::nullopt, fmt::format("{} earlier transfers not drawn", left_out), 0,
                         fmt::format("only the last {} transfers of each track are drawn", max_transfers)});
  return run;
}

}  // namespace collcheck
