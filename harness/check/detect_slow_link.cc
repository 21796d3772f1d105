// One directed edge much slower than the others, with the time a rank was
// not running at all left out of its transfers.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "harness/check/detectors.h"

namespace collcheck::detect {

namespace {

// A transfer's time on the link: from when both sides had posted (so a rank
// busy elsewhere does not make its edges look slow) until both sides saw it
// complete. A slow link delays both ends; a rank that was off the CPU (an
// oversubscribed node, a sanitizer) delays only its own view.
// Less the times when either end's process was not running at all (its stall
// meter woke late): a rank descheduled for 20 ms between posting a send and
// pushing it out delays that transfer without any link being slow.
using StallsByRank = std::map<int, std::vector<Stall>>;

StallsByRank stalls_by_rank(const std::vector<RankDump>& dumps) {
  StallsByRank s;
  for (const auto& d : dumps) s[d.rank] = d.stalls;
  return s;
}

// How much of [lo, hi] falls in the union of ranks a's and b's stalls.
double stalled_within(double lo, double hi, const StallsByRank& stalls, int a, int b) {
  std::vector<Stall> v;
  for (int r : {a, b})
    if (auto it = stalls.find(r); it != stalls.end()) v.insert(v.end(), it->second.begin(), it->second.end());
  std::sort(v.begin(), v.end(), [](const Stall& x, const Stall& y) { return x.begin < y.begin; });
  double total = 0, covered_to = lo;
  for (const auto& x : v) {
    const double from = std::max(x.begin, covered_to), to = std::min(x.end, hi);
    if (to > from) total += to - from;
    covered_to = std::max(covered_to, std::min(x.end, hi));
  }
  return total;
}

double transfer_latency(const TransferRecord& send, const TransferRecord& recv, const StallsByRank& stalls,
                        double* left_out = nullptr) {
  const double lo = std::max(send.t_posted, recv.t_posted), hi = std::min(send.t_completed, recv.t_completed);
  const double stalled = stalled_within(lo, hi, stalls, send.src, send.dst);
  if (left_out) *left_out = stalled;
  return hi - lo - stalled;
}

// The alpha-beta model of a ring all-reduce, T = 2(p-1) alpha + 2(p-1)/p N beta,
// with alpha and beta fitted (least squares) to the transfers of the healthy
// edges, against the slowest call that crossed the slow edge.
template <typename Pairs>
std::string alpha_beta_comparison(const std::vector<RankDump>& dumps, const Pairs& pairs, std::pair<int, int> slow,
                                  const StallsByRank& stalls) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::vector<double> slow_lat;
  std::set<uint64_t> slow_calls;
  for (const auto& [key, p] : pairs) {
    if (!p.first || !p.second) continue;
    const double lat = transfer_latency(*p.first, *p.second, stalls);
    const double bytes = static_cast<double>(p.first->bytes);
    if (std::make_pair(p.first->src, p.first->dst) == slow) {
      slow_lat.push_back(lat);
      slow_calls.insert(call_of_tag(p.first->tag));
      continue;
    }
    n += 1;
    sx += bytes;
    sy += lat;
    sxx += bytes * bytes;
    sxy += bytes * lat;
  }
  if (n < 2 || slow_calls.empty()) return "";
  const double den = n * sxx - sx * sx;
  double beta = den > 0 ? (n * sxy - sx * sy) / den : 0;
  beta = std::max(beta, 0.0);
  const double alpha = std::max((sy - beta * sx) / n, 0.0);
  // The slowest call that used the slow edge: its time on the slowest rank.
  const int p = static_cast<int>(dumps.size());
  double measured = 0, bytes = 0;
  uint64_t seq = 0;
  for (uint64_t k : slow_calls) {
    double t = 0, b = 0;
    for (const auto& d : dumps) {
      const CallRecord* c = call_of(d, k);
      if (!c || c->t_started < 0 || c->t_completed < 0) continue;
      t = std::max(t, c->t_completed - c->t_started);
      b = static_cast<double>(c->count * dtype_size(c->dtype));
    }
    if (t > measured) {
      measured = t;
      bytes = b;
      seq = k;
    }
  }
  if (seq == 0) return "";
  const double steps = 2.0 * (p - 1);
  const double model = steps * alpha + steps / p * bytes * beta;
  std::sort(slow_lat.begin(), slow_lat.end());
  const double extra = slow_lat[(slow_lat.size() - 1) / 2] - (alpha + bytes / p * beta);
  const std::string fit = den > 0 ? fmt::format("a = {:.1f} us and b = {:.3f} ns/B", alpha * 1e6, beta * 1e9)
                                   : fmt::format("a = {:.1f} us (every healthy transfer had the same size, so b is "
                                                 "folded into a)",
                                                 alpha * 1e6);
  return fmt::format(". Call #{} took {:.2f} ms; the alpha-beta model of a ring, 2(p-1)a + 2(p-1)/p N b with {} "
                     "fitted to the healthy edges, predicts {:.2f} ms; {} steps each waiting ~{:.1f} ms extra on the "
                     "slow edge account for {:.2f} ms of the difference",
                     seq, measured * 1e3, fit, model * 1e3, static_cast<int>(steps), extra * 1e3, steps * extra * 1e3);
}

}  // namespace

void slow_link(const Dumps& dumps, const AnalysisOptions& o, std::vector<Diagnosis>& out) {
  const TransferPairs pairs = transfer_pairs(dumps);
  const StallsByRank stalls = stalls_by_rank(dumps);
  struct Span {
    double lo, hi, latency, stalled;
    uint64_t call;  // the call's group and number: slow in how many calls
  };
  std::map<std::pair<int, int>, std::vector<Span>> spans;
  for (const auto& [key, p] : pairs) {
    if (!p.first || !p.second) continue;
    double stalled = 0;
    const double lat = transfer_latency(*p.first, *p.second, stalls, &stalled);
    spans[{p.first->src, p.first->dst}].push_back(Span{std::max(p.first->t_posted, p.second->t_posted),
                                                       std::min(p.first->t_completed, p.second->t_completed), lat,
                                                       stalled, (group_of_tag(p.first->tag) << 40) | call_of_tag(p.first->tag)});
  }
  if (spans.size() < 2) return;
  // One sample per window of time: transfers on an edge that were in flight
  // at the same time (a pipelined or double tree posts several at once) saw
  // the same moment of the link and of both ranks, so one burst of
  // descheduling must not count as several slow transfers. A window counts
  // with its fastest transfer.
  std::map<std::pair<int, int>, std::vector<double>> latency;
  std::map<std::pair<int, int>, size_t> transfers_on;
  for (auto& [edge, v] : spans) {
    std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
    auto& w = latency[edge];
    double window_end = -1e300;
    for (const auto& x : v) {
      if (!w.empty() && x.lo < window_end) {
        w.back() = std::min(w.back(), x.latency);
      } else {
        w.push_back(x.latency);
      }
      window_end = std::max(window_end, x.hi);
    }
    transfers_on[edge] = v.size();
  }
  // Each edge's lower median: a strict majority of its windows took at least
  // that long. A slow link delays every transfer on its edge; a rank that was
  // descheduled (an oversubscribed node, a sanitizer) delays the few it was
  // late for, and one slow window out of two must not name an edge. An edge
  // with a single window is never named: one sample is no majority.
  std::vector<std::pair<double, std::pair<int, int>>> med;
  for (auto& [edge, v] : latency) {
    std::sort(v.begin(), v.end());
    med.push_back({v[(v.size() - 1) / 2], edge});
  }
  std::sort(med.begin(), med.end());
  // The median of the edges.
  const double others = std::max(0.0, med[(med.size() - 1) / 2].first);
  auto worst_it = std::find_if(med.rbegin(), med.rend(), [&](const auto& m) { return latency[m.second].size() >= 2; });
  if (worst_it == med.rend()) return;
  const auto& worst = *worst_it;
  // A slow link is slow in every call that crosses it; a host that was busy
  // during one call (a thread or process descheduled, other jobs) makes one
  // call's transfers slow. So an edge that carried several calls must have
  // been slow (past halfway to its median) in at least two of them.
  std::set<uint64_t> calls, slow_calls;
  for (const auto& x : spans[worst.second]) {
    calls.insert(x.call);
    if (x.latency >= others + (worst.first - others) / 2) slow_calls.insert(x.call);
  }
  if (calls.size() >= 2 && slow_calls.size() < 2) return;
  // The two ranks' times are compared, and each may be off from rank 0's
  // origin by its clock's uncertainty (MPI processes on another node:
  // harness/world/mpi_clock.h); the edge must be slower than that as well.
  std::map<int, double> uncertainty;
  for (const auto& d : dumps) uncertainty[d.rank] = std::max(uncertainty[d.rank], d.clock_uncertainty_s);
  const double clocks = uncertainty[worst.second.first] + uncertainty[worst.second.second];
  if (worst.first > o.slow_factor * others && worst.first - others > o.slow_min_excess_s + clocks) {
    Diagnosis dg;
    dg.kind = DiagnosisKind::SlowLink;
    dg.edge = worst.second;
    dg.ranks = {worst.second.first, worst.second.second};
    dg.factor = others > 0 ? worst.first / others : 0;
    const size_t windows = latency[worst.second].size(), n = transfers_on[worst.second];
    dg.text = fmt::format("the link from rank {} to rank {} is slow: median {:.1f} ms from send to arrival over its {} "
                          "transfers{} (a strict majority were at least that slow), against {:.3f} ms for the median "
                          "edge ({:.0f}x; measured from when both sides had posted until both saw it complete)",
                          worst.second.first, worst.second.second, worst.first * 1e3, n,
                          windows == n ? "" : fmt::format(" in {} windows of time", windows), others * 1e3, dg.factor);
    // What the stall meters took out of this edge's transfers, said only
    // when there was any.
    double stalled = 0, longest = 0;
    for (const auto& x : spans[worst.second]) {
      stalled += x.stalled;
      longest = std::max(longest, x.stalled);
    }
    if (stalled > 0)
      dg.text += fmt::format(" ({:.1f} ms when rank {} or {} was not running at all are left out of its transfers, "
                             "at most {:.1f} ms of one)",
                             stalled * 1e3, worst.second.first, worst.second.second, longest * 1e3);
    if (clocks > 0)
      dg.text += fmt::format(" (ranks {} and {} put their times on rank 0's origin to within {:.3f} ms together)",
                             worst.second.first, worst.second.second, clocks * 1e3);
    dg.text += alpha_beta_comparison(dumps, pairs, worst.second, stalls);
    out.push_back(dg);
  }
}

}  // namespace collcheck::detect
