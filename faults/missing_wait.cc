// Missing wait: on the chosen ranks, one call becomes async and its wait() is
// never made (mode never), its output is read before the wait
// (mode read_before_wait), or its buffer is written before the wait (mode
// write_before_wait: OpenNMT-py #2295 divided the gradients in place).
#include <fmt/format.h>

#include "faults/nemesis.h"

namespace collcheck {
namespace {

std::string mode_of(const FaultSpec& f) {
  auto it = f.fields.find("mode");
  return it == f.fields.end() ? "never" : it->second;
}

void validate(const Scenario& s, const FaultSpec& f) {
  if (f.ranks.empty()) fault_error(s, f, "ranks", "missing: which ranks drop the wait");
  if (f.calls.size() != 1) fault_error(s, f, "call", "expected one call index (from 0)");
  for (int r : f.ranks)
    if (f.calls[0] >= calls_in(s.program(r)))
      fault_error(s, f, "call", fmt::format("rank {} has only {} calls", r, calls_in(s.program(r))));
  const auto m = mode_of(f);
  if (m != "never" && m != "read_before_wait" && m != "write_before_wait")
    fault_error(s, f, "mode", fmt::format("unknown mode '{}'; allowed: never, read_before_wait, write_before_wait", m));
  for (const auto& [k, v] : f.fields)
    if (k != "mode") fault_error(s, f, k, "unknown parameter; allowed: ranks, call, mode");
}

void mutate(Scenario& s, const FaultSpec& f) {
  for (int r : f.ranks) {
    Program& p = s.mutable_program(r);
    CallStep& c = p[static_cast<size_t>(step_of_call(p, f.calls[0]))].call;
    c.async = true;
    if (mode_of(f) == "never") {
      c.wait = WaitAt::Never;
      c.handle.clear();  // its wait step, if any, then finds nothing pending
      c.read_before_wait = false;
      c.write_before_wait = false;
    } else {
      if (c.wait == WaitAt::Call || c.wait == WaitAt::Never) c.wait = WaitAt::Next;
      (mode_of(f) == "read_before_wait" ? c.read_before_wait : c.write_before_wait) = true;
    }
  }
}

ExpectSpec expected(const Scenario&, const FaultSpec& f) {
  ExpectSpec e;
  e.diagnosis = mode_of(f) == "never" ? "unwaited_work" : mode_of(f);
  e.ranks = f.ranks;
  e.seq = static_cast<uint64_t>(f.calls[0]) + 1;
  return e;
}

FaultSpec random(const Scenario& s, uint64_t r) {
  FaultSpec f;
  f.kind = "missing_wait";
  f.ranks = {static_cast<int>(r % static_cast<uint64_t>(s.ranks))};
  f.calls = {static_cast<int>((r >> 8) % static_cast<uint64_t>(calls_in(s.program(f.ranks[0]))))};
  constexpr const char* kModes[] = {"never", "read_before_wait", "write_before_wait"};
  f.fields["mode"] = kModes[(r >> 16) % 3];
  return f;
}

FaultSpec table_instance(const Scenario&) {
  FaultSpec f;
  f.kind = "missing_wait";
  f.ranks = {0};
  f.calls = {1};
  f.fields["mode"] = "never";
  return f;
}

}  // namespace

extern const NemesisInfo kMissingWait{"missing_wait", "an async call never waited for, or read or written before its wait",
                               validate, mutate, nullptr, expected, random, table_instance};

}  // namespace collcheck
