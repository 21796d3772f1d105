// Extra call: the chosen ranks issue one more all-reduce, before call k, that
// the others never make (a metric synced on rank 0 only, an extra logging key
// on one rank). The calls after it are the same on every rank, so the
// analysis can tell which side made it.
#include <fmt/format.h>

#include "faults/nemesis.h"

namespace collcheck {
namespace {

void validate(const Scenario& s, const FaultSpec& f) {
  validate_one_world_call(s, f, "issue the extra call");
  for (const auto& [k, v] : f.fields)
    if (k != "count" && k != "tag") fault_error(s, f, k, "unknown parameter; allowed: ranks, call, count, tag");
  fault_number(s, f, "count", 1, 1 << 20, 1);
}

void mutate(Scenario& s, const FaultSpec& f) {
  for (int r : f.ranks) {
    Program& p = s.mutable_program(r);
    Step extra;
    extra.kind = Step::Call;
    extra.line = f.line;
    const auto tag = f.fields.find("tag");
    extra.call.tag = tag == f.fields.end() ? "extra" : tag->second;
    extra.call.count = static_cast<size_t>(fault_number(s, f, "count", 1, 1 << 20, 1));
    p.insert(p.begin() + step_of_call(p, f.calls[0]), extra);
  }
}

ExpectSpec expected(const Scenario& s, const FaultSpec& f) {
  return one_call_more(s, f.ranks, static_cast<uint64_t>(f.calls[0]) + 1);
}

FaultSpec random(const Scenario& s, uint64_t r) {
  FaultSpec f;
  f.kind = "extra_call";
  f.ranks = {static_cast<int>(r % static_cast<uint64_t>(s.ranks))};
  f.calls = {static_cast<int>((r >> 8) % static_cast<uint64_t>(calls_in(s.program(f.ranks[0]))))};
  return f;
}

FaultSpec table_instance(const Scenario&) {
  FaultSpec f;
  f.kind = "extra_call";
  f.ranks = {0};
  f.calls = {1};
  return f;
}

}  // namespace

extern const NemesisInfo kExtraCall{"extra_call", "one more call on chosen ranks, before call k", validate, mutate, nullptr,
                             expected, random, table_instance};

}  // namespace collcheck
