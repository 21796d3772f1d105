// Skipped call: the chosen ranks leave out call k (an early `continue`, a
// bucket one rank thinks is empty). Skipping the last call leaves the others
// waiting in it: a missing rank.
#include <fmt/format.h>

#include <algorithm>

#include "faults/nemesis.h"

namespace collcheck {
namespace {

void validate(const Scenario& s, const FaultSpec& f) {
  validate_one_world_call(s, f, "skip the call");
  for (const auto& [k, v] : f.fields) fault_error(s, f, k, "unknown parameter; allowed: ranks, call");
}

void mutate(Scenario& s, const FaultSpec& f) {
  for (int r : f.ranks) {
    Program& p = s.mutable_program(r);
    p.erase(p.begin() + step_of_call(p, f.calls[0]));
  }
}

ExpectSpec expected(const Scenario& s, const FaultSpec& f) {
  const uint64_t seq = static_cast<uint64_t>(f.calls[0]) + 1;
  // The last call skipped: nothing follows it, and the others wait in it.
  if (f.calls[0] + 1 >= calls_in(s.program(f.ranks[0]))) {
    ExpectSpec e;
    e.diagnosis = "missing_rank";
    e.ranks = f.ranks;
    e.seq = seq;
    return e;
  }
  std::vector<int> others;
  for (int r = 0; r < s.ranks; ++r)
    if (std::find(f.ranks.begin(), f.ranks.end(), r) == f.ranks.end()) others.push_back(r);
  return one_call_more(s, others, seq);
}

// A call with one after it, so that the sequences can realign.
FaultSpec random(const Scenario& s, uint64_t r) {
  FaultSpec f;
  f.kind = "skipped_call";
  f.ranks = {static_cast<int>(r % static_cast<uint64_t>(s.ranks))};
  f.calls = {static_cast<int>((r >> 8) % static_cast<uint64_t>(calls_in(s.program(f.ranks[0])) - 1))};
  return f;
}

FaultSpec table_instance(const Scenario& s) {
  FaultSpec f;
  f.kind = "skipped_call";
  f.ranks = {s.ranks - 1};
  f.calls = {1};
  return f;
}

bool fits(const Scenario& s) { return calls_in(s.defaults) >= 2; }

}  // namespace

extern const NemesisInfo kSkippedCall{"skipped_call", "call k left out on chosen ranks", validate, mutate, nullptr, expected,
                               random, table_instance, fits};

}  // namespace collcheck
