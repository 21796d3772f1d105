// Mismatched shape: on the chosen ranks, one call's count, dtype or op differs
// from what the other ranks call (the 1025-vs-1024 bucket bug).
#include <fmt/format.h>

#include "faults/nemesis.h"

namespace collcheck {
namespace {

void validate(const Scenario& s, const FaultSpec& f) {
  if (f.ranks.empty()) fault_error(s, f, "ranks", "missing: which ranks call the different shape");
  if (f.calls.size() != 1) fault_error(s, f, "call", "expected one call index (from 0)");
  for (int r : f.ranks)
    if (f.calls[0] >= calls_in(s.program(r)))
      fault_error(s, f, "call", fmt::format("rank {} has only {} calls", r, calls_in(s.program(r))));
  int n = 0;
  for (const char* k : {"count", "dtype", "op"}) n += f.fields.count(k) ? 1 : 0;
  if (n == 0) fault_error(s, f, "", "needs at least one of count, dtype, op");
  for (const auto& [k, v] : f.fields) {
    if (k == "count") {
      fault_number(s, f, "count", 0, 1e12, 0);
    } else if (k == "dtype") {
      if (!parse_dtype(v)) fault_error(s, f, "dtype", fmt::format("unknown dtype '{}'; allowed: {}", v, dtype_choices()));
    } else if (k == "op") {
      if (!parse_op(v)) fault_error(s, f, "op", fmt::format("unknown op '{}'; allowed: {}", v, op_choices()));
    } else {
      fault_error(s, f, k, "unknown parameter; allowed: ranks, call, count, dtype, op");
    }
  }
}

void mutate(Scenario& s, const FaultSpec& f) {
  for (int r : f.ranks) {
    Program& p = s.mutable_program(r);
    CallStep& c = p[static_cast<size_t>(step_of_call(p, f.calls[0]))].call;
    if (auto it = f.fields.find("count"); it != f.fields.end()) c.count = std::stoull(it->second);
    if (auto it = f.fields.find("dtype"); it != f.fields.end()) c.dtype = *parse_dtype(it->second);
    if (auto it = f.fields.find("op"); it != f.fields.end()) c.op = *parse_op(it->second);
  }
}

ExpectSpec expected(const Scenario&, const FaultSpec& f) {
  ExpectSpec e;
  e.diagnosis = "shape_mismatch";
  e.ranks = f.ranks;
  e.seq = static_cast<uint64_t>(f.calls[0]) + 1;
  for (const char* k : {"count", "dtype", "op"})
    if (f.fields.count(k)) e.fields.push_back(k);
  return e;
}

FaultSpec random(const Scenario& s, uint64_t r) {
  FaultSpec f;
  f.kind = "mismatched_shape";
  f.ranks = {static_cast<int>(r % static_cast<uint64_t>(s.ranks))};
  const int calls = calls_in(s.program(f.ranks[0]));
  f.calls = {static_cast<int>((r >> 8) % static_cast<uint64_t>(calls))};
  const CallStep& c = s.program(f.ranks[0])[static_cast<size_t>(step_of_call(s.program(f.ranks[0]), f.calls[0]))].call;
  switch ((r >> 16) % 3) {
    case 0: f.fields["count"] = std::to_string(c.count + 1 + (r >> 20) % 7); break;
    case 1: f.fields["dtype"] = std::string(dtype_name(c.dtype == DType::Float32 ? DType::Float16 : DType::Float32)); break;
    default: f.fields["op"] = std::string(op_name(c.op == RedOp::Sum ? RedOp::Max : RedOp::Sum)); break;
  }
  return f;
}

FaultSpec table_instance(const Scenario& s) {
  FaultSpec f;
  f.kind = "mismatched_shape";
  f.ranks = {s.ranks - 1};
  f.calls = {0};
  f.fields["count"] = "4097";
  return f;
}

// One odd rank out needs two good ones to be named against.
bool fits(const Scenario& s) { return s.ranks >= 3; }

}  // namespace

extern const NemesisInfo kMismatchedShape{"mismatched_shape", "count, dtype or op of one call differs on chosen ranks",
                                   validate, mutate, nullptr, expected, random, table_instance, fits};

}  // namespace collcheck
