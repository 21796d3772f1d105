// Late rank: one rank enters a call after its peers have given up on it (a
// checkpoint read or a slow data loader on that rank alone, between two
// calls). It does arrive: the diagnosis must name it as late, in the call and
// group it was late for, and not blame a rank that was only waiting for it
// (issue 31, item 3).
#include <fmt/format.h>

#include "faults/nemesis.h"

namespace collcheck {
namespace {

// How late, in deadlines of the scenario, by default.
constexpr double kDefaultDeadlines = 3;

double delay_s(const Scenario& s, const FaultSpec& f) {
  return fault_number(s, f, "delay", s.deadline_s * 1.5, 3600, s.deadline_s * kDefaultDeadlines);
}

void validate(const Scenario& s, const FaultSpec& f) {
  if (f.ranks.size() != 1) fault_error(s, f, "ranks", "expected one rank: the one that arrives late");
  if (s.ranks < 2) fault_error(s, f, "ranks", "a late rank needs peers that wait for it: at least 2 ranks");
  if (f.calls.size() != 1) fault_error(s, f, "call", "expected one call index (from 0): the call it is late for");
  const int r = f.ranks[0];
  if (f.calls[0] >= calls_in(s.program(r)))
    fault_error(s, f, "call", fmt::format("rank {} has only {} calls", r, calls_in(s.program(r))));
  for (const auto& [k, v] : f.fields)
    if (k != "delay") fault_error(s, f, k, "unknown parameter; allowed: ranks, call, delay (seconds, above 1.5 deadlines)");
  (void)delay_s(s, f);
}

void mutate(Scenario& s, const FaultSpec& f) {
  Program& p = s.mutable_program(f.ranks[0]);
  Step sleep;
  sleep.kind = Step::Sleep;
  sleep.sleep_ms = delay_s(s, f) * 1000;
  sleep.line = f.line;
  p.insert(p.begin() + step_of_call(p, f.calls[0]), sleep);
}

ExpectSpec expected(const Scenario&, const FaultSpec& f) {
  ExpectSpec e;
  e.diagnosis = "late_rank";
  e.ranks = f.ranks;
  e.seq = static_cast<uint64_t>(f.calls[0]) + 1;
  return e;
}

// Attributable where every rank's call k is a blocking world all-reduce that
// its peers wait in: the scenarios with no groups and no async calls.
bool fits(const Scenario& s) {
  if (s.ranks < 2 || !s.groups.empty()) return false;
  for (int r = 0; r < s.ranks; ++r)
    for (const Step& st : s.program(r))
      if (st.kind == Step::Call &&
          (st.call.async || !st.call.group.empty() || st.call.coll == Collective::Send || st.call.coll == Collective::Recv))
        return false;
  return true;
}

FaultSpec random(const Scenario& s, uint64_t r) {
  FaultSpec f;
  f.kind = "late_rank";
  f.ranks = {static_cast<int>(r % static_cast<uint64_t>(s.ranks))};
  f.calls = {static_cast<int>((r >> 8) % static_cast<uint64_t>(calls_in(s.program(f.ranks[0]))))};
  return f;
}

FaultSpec table_instance(const Scenario&) {
  FaultSpec f;
  f.kind = "late_rank";
  f.ranks = {0};
  f.calls = {2};
  return f;
}

// The others wait one deadline; the late rank sleeps, then finds them gone.
double extra_time(const Scenario& s) { return s.deadline_s * (kDefaultDeadlines + 1); }

}  // namespace

extern const NemesisInfo kLateRank{"late_rank", "a rank that enters a call after its peers' deadline", validate, mutate,
                            nullptr, expected, random, table_instance, fits, nullptr, extra_time};

}  // namespace collcheck
