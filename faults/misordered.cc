// Misordered collectives: on the chosen ranks, two calls are swapped (two
// gradient buckets reduced in a different order, as after a hook reorder).
#include <fmt/format.h>

#include <utility>

#include "faults/nemesis.h"

namespace collcheck {
namespace {

void validate(const Scenario& s, const FaultSpec& f) {
  if (f.ranks.empty()) fault_error(s, f, "ranks", "missing: which ranks swap their calls");
  if (f.calls.size() != 2 || f.calls[0] == f.calls[1])
    fault_error(s, f, "calls", "expected two different call indices, e.g. calls: [0, 1]");
  for (const auto& [k, v] : f.fields) fault_error(s, f, k, "unknown parameter; allowed: ranks, calls");
  for (int r : f.ranks) {
    const Program& p = s.program(r);
    for (int c : f.calls)
      if (c >= calls_in(p)) fault_error(s, f, "calls", fmt::format("rank {} has only {} calls", r, calls_in(p)));
    const auto& a = p[static_cast<size_t>(step_of_call(p, f.calls[0]))].call;
    const auto& b = p[static_cast<size_t>(step_of_call(p, f.calls[1]))].call;
    if (a.tag == b.tag) fault_error(s, f, "calls", "the two calls have the same tag; swapping them changes nothing");
  }
}

void mutate(Scenario& s, const FaultSpec& f) {
  for (int r : f.ranks) {
    Program& p = s.mutable_program(r);
    std::swap(p[static_cast<size_t>(step_of_call(p, f.calls[0]))].call,
              p[static_cast<size_t>(step_of_call(p, f.calls[1]))].call);
  }
}

ExpectSpec expected(const Scenario&, const FaultSpec& f) {
  ExpectSpec e;
  e.diagnosis = "order_mismatch";
  e.ranks = f.ranks;
  e.seq = static_cast<uint64_t>(std::min(f.calls[0], f.calls[1])) + 1;
  e.fields = {"tag"};
  return e;
}

FaultSpec random(const Scenario& s, uint64_t r) {
  FaultSpec f;
  f.kind = "misordered";
  f.ranks = {static_cast<int>(r % static_cast<uint64_t>(s.ranks))};
  const int calls = calls_in(s.program(f.ranks[0]));
  const int a = static_cast<int>((r >> 8) % static_cast<uint64_t>(calls - 1));
  const int b = a + 1 + static_cast<int>((r >> 16) % static_cast<uint64_t>(calls - 1 - a));
  f.calls = {a, b};
  return f;
}

FaultSpec table_instance(const Scenario& s) {
  FaultSpec f;
  f.kind = "misordered";
  f.ranks = {s.ranks - 1};
  f.calls = {0, 2};
  return f;
}

// Two calls to swap, and two good ranks to name the odd one against.
bool fits(const Scenario& s) { return s.ranks >= 3 && calls_in(s.defaults) >= 2; }

}  // namespace

extern const NemesisInfo kMisordered{"misordered", "two calls swapped on chosen ranks", validate, mutate, nullptr, expected,
                              random, table_instance, fits};

}  // namespace collcheck
