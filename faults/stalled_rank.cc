// Stalled rank: the chosen ranks never enter one call (a data-loader hang, a
// rank stuck in a host-side barrier). The others wait for them until the
// deadline.
#include <fmt/format.h>

#include "faults/nemesis.h"

namespace collcheck {
namespace {

void validate(const Scenario& s, const FaultSpec& f) {
  if (f.ranks.empty()) fault_error(s, f, "ranks", "missing: which ranks stall");
  if (static_cast<int>(f.ranks.size()) >= s.ranks) fault_error(s, f, "ranks", "at least one rank must not stall");
  if (f.calls.size() != 1) fault_error(s, f, "call", "expected one call index (from 0): the call never entered");
  for (int r : f.ranks)
    if (f.calls[0] >= calls_in(s.program(r)))
      fault_error(s, f, "call", fmt::format("rank {} has only {} calls", r, calls_in(s.program(r))));
  for (const auto& [k, v] : f.fields) fault_error(s, f, k, "unknown parameter; allowed: ranks, call");
}

void mutate(Scenario& s, const FaultSpec& f) {
  for (int r : f.ranks) {
    Program& p = s.mutable_program(r);
    Step stall;
    stall.kind = Step::Stall;
    stall.line = f.line;
    p.insert(p.begin() + step_of_call(p, f.calls[0]), stall);
  }
}

ExpectSpec expected(const Scenario&, const FaultSpec& f) {
  ExpectSpec e;
  e.diagnosis = "missing_rank";
  e.ranks = f.ranks;
  e.seq = static_cast<uint64_t>(f.calls[0]) + 1;
  return e;
}

FaultSpec random(const Scenario& s, uint64_t r) {
  FaultSpec f;
  f.kind = "stalled_rank";
  f.ranks = {static_cast<int>(r % static_cast<uint64_t>(s.ranks))};
  f.calls = {static_cast<int>((r >> 8) % static_cast<uint64_t>(calls_in(s.program(f.ranks[0]))))};
  return f;
}

FaultSpec table_instance(const Scenario& s) {
  FaultSpec f;
  f.kind = "stalled_rank";
  f.ranks = {s.ranks - 1};
  f.calls = {2};
  return f;
}

// The others wait one deadline for the stalled rank.
double extra_time(const Scenario& s) { return s.deadline_s; }

}  // namespace

extern const NemesisInfo kStalledRank{"stalled_rank", "a rank that never enters a call", validate, mutate, nullptr, expected,
                               random, table_instance, nullptr, nullptr, extra_time};

}  // namespace collcheck
