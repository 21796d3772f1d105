#include "harness/diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

namespace collcheck {

namespace {
constexpr std::pair<DiagnosisKind, std::string_view> kNames[] = {
    {DiagnosisKind::ShapeMismatch, "shape_mismatch"},       {DiagnosisKind::OrderMismatch, "order_mismatch"},
    {DiagnosisKind::MissingRank, "missing_rank"},           {DiagnosisKind::Deadlock, "deadlock"},
    {DiagnosisKind::UnwaitedWork, "unwaited_work"},         {DiagnosisKind::ReadBeforeWait, "read_before_wait"},
    {DiagnosisKind::SlowLink, "slow_link"},                 {DiagnosisKind::CorruptedPayload, "corrupted_payload"},
    {DiagnosisKind::WrongResult, "wrong_result"},           {DiagnosisKind::CallFailed, "call_failed"},
    {DiagnosisKind::RankCrashed, "rank_crashed"},
};

std::string ranks_text(const std::vector<int>& r) {
  std::string s;
  for (size_t i = 0; i < r.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", r[i]);
  return (r.size() == 1 ? "rank " : "ranks ") + s;
}

const CallRecord* call_of(const RankDump& d, uint64_t seq) {
  for (const auto& c : d.calls)
    if (c.seq == seq) return &c;
  return nullptr;
}

uint64_t last_seq(const RankDump& d) { return d.calls.empty() ? 0 : d.calls.back().seq; }

uint64_t last_completed(const RankDump& d) {
  uint64_t s = 0;
  for (const auto& c : d.calls)
    if (c.state == CallState::Completed || c.state == CallState::Waited) s = std::max(s, c.seq);
  return s;
}

// "0: #3, 1: #2, ...": the last call each rank completed.
std::string last_completed_text(const std::vector<RankDump>& dumps) {
  std::string s;
  for (const auto& d : dumps) s += fmt::format("{}{}: #{}", s.empty() ? "" : ", ", d.rank, last_completed(d));
  return s;
}

std::string fp_text(const CallRecord& c) {
  return fmt::format("{} count={} {} {}", c.tag, c.count, dtype_name(c.dtype), op_name(c.op));
}

// The first sequence number at which ranks disagree on the call.
std::optional<Diagnosis> fingerprint_mismatch(const std::vector<RankDump>& dumps) {
  uint64_t max_seq = 0;
  for (const auto& d : dumps) max_seq = std::max(max_seq, last_seq(d));
  for (uint64_t k = 1; k <= max_seq; ++k) {
    std::map<std::tuple<std::string, size_t, int, int>, std::vector<int>> groups;
    std::map<std::tuple<std::string, size_t, int, int>, const CallRecord*> sample;
    for (const auto& d : dumps) {
      const CallRecord* c = call_of(d, k);
      if (!c) continue;
      const auto key = std::make_tuple(c->tag, c->count, static_cast<int>(c->dtype), static_cast<int>(c->op));
      groups[key].push_back(d.rank);
      sample[key] = c;
    }
    if (groups.size() < 2) continue;
    // The majority is the reference; on a tie, the group with the lowest rank.
    auto ref = groups.begin();
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      if (it->second.size() > ref->second.size() ||
          (it->second.size() == ref->second.size() && it->second.front() < ref->second.front()))
        ref = it;
    }
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
      if (o.count != r.count) fields.insert("count");
      if (o.dtype != r.dtype) fields.insert("dtype");
      if (o.op != r.op) fields.insert("op");
      others += fmt::format("; {} called {}", ranks_text(it->second), fp_text(o));
    }
    std::sort(d.ranks.begin(), d.ranks.end());
    d.fields.assign(fields.begin(), fields.end());
    d.kind = fields.count("tag") ? DiagnosisKind::OrderMismatch : DiagnosisKind::ShapeMismatch;
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

std::optional<Diagnosis> missing_rank(const std::vector<RankDump>& dumps) {
  uint64_t max_seq = 0;
  for (const auto& d : dumps) max_seq = std::max(max_seq, last_seq(d));
  for (uint64_t k = 1; k <= max_seq; ++k) {
    std::vector<int> joined, missing;
    for (const auto& d : dumps) (call_of(d, k) ? joined : missing).push_back(d.rank);
    if (missing.empty()) continue;
    // Joined ranks that did not finish the call: they waited for the missing ones.
    bool stuck = false;
    for (const auto& d : dumps) {
      const CallRecord* c = call_of(d, k);
      if (c && c->state != CallState::Completed && c->state != CallState::Waited) stuck = true;
    }
    if (!stuck) continue;
    Diagnosis dg;
    dg.kind = DiagnosisKind::MissingRank;
    dg.seq = k;
    dg.ranks = missing;
    dg.text = fmt::format("{} never joined call #{} ({}), which {} joined but could not finish; last call completed "
                          "per rank: {}",
                          ranks_text(missing), k, fp_text(*call_of(dumps[static_cast<size_t>(joined.front())], k)),
                          ranks_text(joined), last_completed_text(dumps));
    return dg;
  }
  return std::nullopt;
}

// The crash handler wrote the dumps: name the rank that died, of which
// signal, and where it was (the call it had begun and not finished, or the
// last call it finished).
std::optional<Diagnosis> crashed_rank(const std::vector<RankDump>& dumps) {
  const CrashNote* note = nullptr;
  for (const auto& d : dumps)
    if (d.crash) note = &*d.crash;
  if (!note) return std::nullopt;
  Diagnosis dg;
  dg.kind = DiagnosisKind::RankCrashed;
  const std::string last = last_completed_text(dumps);
  if (note->rank < 0) {
    dg.text = fmt::format("the process died of signal {} on a thread that is not a rank's (a library's own thread, "
                          "or the driver); last call completed per rank: {}",
                          note->signal, last);
    return dg;
  }
  dg.ranks = {note->rank};
  std::string where = "(its dump is not here)";
  for (const auto& d : dumps) {
    if (d.rank != note->rank) continue;
    const CallRecord* in_call = nullptr;  // the first call it had not finished
    for (const auto& c : d.calls) {
      if (c.state == CallState::Scheduled || c.state == CallState::Started) {
        in_call = &c;
        break;
      }
    }
    if (in_call) {
      dg.seq = in_call->seq;
      where = fmt::format("in call #{} ({}), which it had {}", in_call->seq, fp_text(*in_call),
                          in_call->state == CallState::Started ? "begun" : "scheduled but not begun");
    } else if (const uint64_t k = last_completed(d)) {
      where = fmt::format("outside any call, after call #{}", k);
    } else {
      where = "before its first call";
    }
  }
  dg.text = fmt::format("rank {} died of signal {} {}; last call completed per rank: {}", note->rank, note->signal,
                        where, last);
  return dg;
}

// Ranks blocked on each other in a cycle (each in a call the others have not reached or left).
std::optional<Diagnosis> wait_cycle(const std::vector<RankDump>& dumps) {
  std::map<int, int> waits_on;
  for (const auto& d : dumps)
    if (d.blocked_on.blocked) waits_on[d.rank] = d.blocked_on.peer;
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

void transfer_checks(const std::vector<RankDump>& dumps, const AnalysisOptions& o, std::vector<Diagnosis>& out) {
  // Pair each send with its receive.
  std::map<std::tuple<int, int, Tag, uint64_t>, std::pair<const TransferRecord*, const TransferRecord*>> pairs;
  for (const auto& d : dumps) {
    for (const auto& t : d.transfers) {
      auto& p = pairs[{t.src, t.dst, t.tag, t.ordinal}];
      (t.send ? p.first : p.second) = &t;
    }
  }
  std::optional<Diagnosis> corrupt;
  const StallsByRank stalls = stalls_by_rank(dumps);
  struct Span {
    double lo, hi, latency, stalled;
  };
  std::map<std::pair<int, int>, std::vector<Span>> spans;
  for (const auto& [key, p] : pairs) {
    if (!p.first || !p.second) continue;
    if (p.first->checksum != p.second->checksum && !corrupt) {
      Diagnosis dg;
      dg.kind = DiagnosisKind::CorruptedPayload;
      dg.edge = std::make_pair(p.first->src, p.first->dst);
      dg.seq = call_of_tag(p.first->tag);
      dg.ranks = {p.first->dst};
      dg.text = fmt::format("the payload of a transfer from rank {} to rank {} ({}, {} bytes) changed on the link: "
                            "checksum {:#018x} sent, {:#018x} received",
                            p.first->src, p.first->dst, describe_tag(p.first->tag), p.first->bytes,
                            p.first->checksum, p.second->checksum);
      corrupt = dg;
    }
    double stalled = 0;
    const double lat = transfer_latency(*p.first, *p.second, stalls, &stalled);
    spans[{p.first->src, p.first->dst}].push_back(Span{std::max(p.first->t_posted, p.second->t_posted),
                                                       std::min(p.first->t_completed, p.second->t_completed), lat,
                                                       stalled});
  }
  if (corrupt) out.push_back(*corrupt);
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
  if (worst.first > o.slow_factor * others && worst.first - others > o.slow_min_excess_s) {
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
    dg.text += alpha_beta_comparison(dumps, pairs, worst.second, stalls);
    out.push_back(dg);
  }
}

}  // namespace

std::string_view diagnosis_name(DiagnosisKind k) {
  for (const auto& [kind, name] : kNames)
    if (kind == k) return name;
  return "?";
}

std::optional<DiagnosisKind> parse_diagnosis(std::string_view s) {
  for (const auto& [kind, name] : kNames)
    if (name == s) return kind;
  return std::nullopt;
}

std::string diagnosis_choices() {
  std::string s = "none";
  for (const auto& [kind, name] : kNames) s += fmt::format(", {}", name);
  return s;
}

std::vector<Diagnosis> analyze(const std::vector<RankDump>& dumps, const AnalysisOptions& o) {
  std::vector<Diagnosis> out;
  // A mismatch is named first even when a rank then crashed (a mismatched
  // count can overrun a buffer); a crash explains ranks left waiting for it.
  const auto mismatch = fingerprint_mismatch(dumps);
  const auto crash = crashed_rank(dumps);
  if (mismatch) out.push_back(*mismatch);
  if (crash) out.push_back(*crash);
  if (!mismatch && !crash) {
    if (auto m = missing_rank(dumps)) {
      out.push_back(*m);
    } else if (auto c = wait_cycle(dumps)) {
      out.push_back(*c);
    }
  }
  transfer_checks(dumps, o, out);
  // Reads before wait, and (in a finished run) async calls never waited for.
  std::map<uint64_t, std::vector<int>> unwaited, early;
  for (const auto& d : dumps) {
    for (const auto& c : d.calls) {
      if (c.async && c.t_read >= 0 && (c.t_waited < 0 || c.t_read < c.t_waited)) early[c.seq].push_back(d.rank);
      if (c.async && o.run_finished && c.state == CallState::Completed) unwaited[c.seq].push_back(d.rank);
    }
  }
  if (!early.empty()) {
    Diagnosis dg;
    dg.kind = DiagnosisKind::ReadBeforeWait;
    dg.seq = early.begin()->first;
    dg.ranks = early.begin()->second;
    dg.text = fmt::format("the output of async call #{} was read on {} before its wait(); collcheck poisons "
                          "unwaited outputs, so the read saw poison, not the result",
                          *dg.seq, ranks_text(dg.ranks));
    out.push_back(dg);
  }
  if (!unwaited.empty()) {
    Diagnosis dg;
    dg.kind = DiagnosisKind::UnwaitedWork;
    dg.seq = unwaited.begin()->first;
    dg.ranks = unwaited.begin()->second;
    dg.text = fmt::format("async call #{} completed on {} but its wait() was never made", *dg.seq,
                          ranks_text(dg.ranks));
    out.push_back(dg);
  }
  if (out.empty()) {
    // Failed calls with nothing above to explain them.
    for (const auto& d : dumps) {
      for (const auto& c : d.calls) {
        if (c.state == CallState::Failed) {
          Diagnosis dg;
          dg.kind = DiagnosisKind::CallFailed;
          dg.seq = c.seq;
          dg.ranks = {d.rank};
          dg.text = fmt::format("call #{} failed on rank {}: {}", c.seq, d.rank, c.error);
          out.push_back(dg);
          return out;
        }
      }
    }
  }
  return out;
}

std::vector<RankDump> load_dumps(const std::string& dir) {
  std::vector<RankDump> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw std::runtime_error(fmt::format("{}: not a directory", dir));
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    try {
      out.push_back(rank_dump_from_json(nlohmann::json::parse(in)));
    } catch (const std::exception& ex) {
      throw std::runtime_error(fmt::format("{}: not a collcheck flight-recorder dump: {}", e.path().string(), ex.what()));
    }
  }
  if (out.empty()) throw std::runtime_error(fmt::format("{}: no rank-*.json dumps found", dir));
  std::sort(out.begin(), out.end(), [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  const int size = out.front().size;
  std::set<int> have;
  for (const auto& d : out) {
    if (d.size != size)
      throw std::runtime_error(fmt::format("{}: the dumps are of different worlds: rank {} of size {}, rank {} of size {}",
                                           dir, out.front().rank, size, d.rank, d.size));
    if (d.rank < 0 || d.rank >= size || !have.insert(d.rank).second)
      throw std::runtime_error(fmt::format("{}: rank {} is not one of ranks 0..{}, or appears twice", dir, d.rank,
                                           size - 1));
  }
  if (static_cast<int>(out.size()) != size) {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r)
      if (!have.count(r)) missing.push_back(r);
    std::string crash;
    for (const auto& d : out) {
      if (d.crash && d.crash->rank >= 0)
        crash = fmt::format(". These are crash dumps: rank {} died of signal {}, and in the MPI world only the "
                            "process that died writes its dump",
                            d.crash->rank, d.crash->signal);
    }
    throw std::runtime_error(fmt::format("{}: dumps of a world of {} ranks, but {} missing; the analysis needs every "
                                         "rank's dump{}",
                                         dir, size, ranks_text(missing) + (missing.size() == 1 ? " is" : " are"),
                                         crash));
  }
  return out;
}

std::string format_diagnosis(const Diagnosis& d) {
  std::string s = fmt::format("{}", diagnosis_name(d.kind));
  if (!d.ranks.empty()) s += fmt::format(" [{}]", ranks_text(d.ranks));
  if (d.seq) s += fmt::format(" [call #{}]", *d.seq);
  if (d.edge) s += fmt::format(" [edge {} -> {}]", d.edge->first, d.edge->second);
  return s + ": " + d.text;
}

std::string format_timeline(const std::vector<RankDump>& dumps) {
  std::string s = "timeline (seconds from the start; B began, D done, W waited):\n";
  for (const auto& d : dumps) {
    bool first = true;
    for (const auto& c : d.calls) {
      std::string times;
      if (c.t_started >= 0) times += fmt::format(" B {:.3f}", c.t_started);
      if (c.t_completed >= 0) times += fmt::format(" D {:.3f}", c.t_completed);
      if (c.t_waited >= 0) times += fmt::format(" W {:.3f}", c.t_waited);
      std::string state = std::string(call_state_name(c.state));
      if (c.state == CallState::Failed) state += ": " + (c.error.size() > 90 ? c.error.substr(0, 87) + "..." : c.error);
      s += fmt::format("  {:<8} #{:<3} {:<14} {:>7} {:<8} {:<9} {:<5}{:<26} {}\n",
                       first ? fmt::format("rank {}", d.rank) : "", c.seq, c.tag, c.count, dtype_name(c.dtype),
                       op_name(c.op), c.async ? "async" : "", times, state);
      first = false;
    }
    if (d.calls.empty()) s += fmt::format("  rank {:<3} (no calls)\n", d.rank);
    if (d.blocked_on.blocked)
      s += fmt::format("  {:<8} blocked on {} rank {}, {}, since {:.3f}\n", "", d.blocked_on.send ? "send to" : "recv from",
                       d.blocked_on.peer, describe_tag(d.blocked_on.tag), d.blocked_on.since);
  }
  return s;
}

}  // namespace collcheck
