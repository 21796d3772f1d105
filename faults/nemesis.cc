#include "faults/nemesis.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace collcheck {

// The registry: one row per nemesis, its declaration beside it (the
// definition is in the nemesis's own file).
extern const NemesisInfo kMismatchedShape;   // mismatched_shape.cc
extern const NemesisInfo kMisordered;        // misordered.cc
extern const NemesisInfo kMissingWait;       // missing_wait.cc
extern const NemesisInfo kSlowLink;          // slow_link.cc
extern const NemesisInfo kStalledRank;       // stalled_rank.cc
extern const NemesisInfo kCorruptedPayload;  // corrupted_payload.cc
extern const NemesisInfo kExtraCall;         // extra_call.cc
extern const NemesisInfo kSkippedCall;       // skipped_call.cc
extern const NemesisInfo kLateRank;          // late_rank.cc

namespace {
const NemesisInfo* const kNemeses[] = {&kMismatchedShape, &kMisordered, &kMissingWait, &kSlowLink, &kStalledRank,
                                       &kCorruptedPayload, &kExtraCall, &kSkippedCall, &kLateRank};
std::vector<NemesisInfo> registry() {
  std::vector<NemesisInfo> v;
  for (const auto* n : kNemeses) v.push_back(*n);
  return v;
}
}  // namespace

std::span<const NemesisInfo> nemeses() {
  static const std::vector<NemesisInfo> all = registry();
  return all;
}

const NemesisInfo* find_nemesis(std::string_view name) {
  for (const auto& n : nemeses())
    if (n.name == name) return &n;
  return nullptr;
}

std::string nemesis_choices() {
  std::string s;
  for (const auto& n : nemeses()) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

void fault_error(const Scenario& s, const FaultSpec& f, std::string_view field, const std::string& what) {
  throw ScenarioError(fmt::format("{}:{}: faults.{}{}{}: {}", s.file, f.line, f.kind, field.empty() ? "" : ".", field,
                                  what));
}

int step_of_call(const Program& p, int call) {
  int n = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].kind != Step::Call) continue;
    if (n++ == call) return static_cast<int>(i);
  }
  return -1;
}

void validate_one_world_call(const Scenario& s, const FaultSpec& f, std::string_view what) {
  if (f.ranks.empty()) fault_error(s, f, "ranks", fmt::format("missing: which ranks {}", what));
  if (static_cast<int>(f.ranks.size()) >= s.ranks) fault_error(s, f, "ranks", fmt::format("at least one rank must not {}", what));
  if (f.calls.size() != 1) fault_error(s, f, "call", "expected one call index (from 0)");
  for (int r : f.ranks) {
    const Program& p = s.program(r);
    if (f.calls[0] >= calls_in(p))
      fault_error(s, f, "call", fmt::format("rank {} has only {} calls", r, calls_in(p)));
    const auto& c = p[static_cast<size_t>(step_of_call(p, f.calls[0]))].call;
    if (!c.group.empty())
      fault_error(s, f, "call", fmt::format("call {} of rank {} is in process group {}; pick a call of the world",
                                            f.calls[0], r, c.group));
  }
}

ExpectSpec one_call_more(const Scenario& s, const std::vector<int>& with_more, uint64_t seq) {
  ExpectSpec e;
  e.seq = seq;
  if (2 * static_cast<int>(with_more.size()) <= s.ranks) {
    e.diagnosis = "extra_call";
    e.ranks = with_more;
    std::sort(e.ranks.begin(), e.ranks.end());
    return e;
  }
  e.diagnosis = "skipped_call";
  for (int r = 0; r < s.ranks; ++r)
    if (std::find(with_more.begin(), with_more.end(), r) == with_more.end()) e.ranks.push_back(r);
  return e;
}

int calls_in(const Program& p) {
  int n = 0;
  for (const auto& s : p) n += s.kind == Step::Call;
  return n;
}

double fault_number(const Scenario& s, const FaultSpec& f, const std::string& key, double lo, double hi,
                    double dflt) {
  auto it = f.fields.find(key);
  if (it == f.fields.end()) return dflt;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || !(v >= lo && v <= hi))
    fault_error(s, f, key, fmt::format("expected a number in [{}, {}], got '{}'", lo, hi, it->second));
  return v;
}

int fault_rank(const Scenario& s, const FaultSpec& f, const std::string& key) {
  auto it = f.fields.find(key);
  if (it == f.fields.end()) fault_error(s, f, key, fmt::format("missing; a rank in [0, {}]", s.ranks - 1));
  const double v = fault_number(s, f, key, 0, s.ranks - 1, 0);
  if (v != std::floor(v)) fault_error(s, f, key, fmt::format("expected a rank in [0, {}]", s.ranks - 1));
  return static_cast<int>(v);
}

Scenario apply_mutators(const Scenario& in) {
  Scenario s = in;
  for (const auto& f : in.faults) {
    const NemesisInfo* n = find_nemesis(f.kind);
    if (!n)
      throw ScenarioError(fmt::format("{}:{}: faults: unknown fault '{}'; allowed: {}", in.file, f.line, f.kind,
                                      nemesis_choices()));
    n->validate(in, f);
  }
  for (const auto& f : in.faults) {
    const NemesisInfo* n = find_nemesis(f.kind);
    if (n->mutate) n->mutate(s, f);
  }
  return s;
}

Links& wrap_links(const Scenario& s, int rank, Links& inner, std::vector<std::unique_ptr<Links>>& keep) {
  Links* cur = &inner;
  keep.clear();
  keep.resize(s.faults.size());  // keep[i]: fault i's wrapper on this rank, if any
  for (size_t i = 0; i < s.faults.size(); ++i) {
    const NemesisInfo* n = find_nemesis(s.faults[i].kind);
    if (!n || !n->wrap) continue;
    if (auto w = n->wrap(*cur, s.faults[i], rank)) {
      cur = w.get();
      keep[i] = std::move(w);
    }
  }
  return *cur;
}

std::vector<FaultTally> fault_tallies(const Scenario& s, const std::vector<std::unique_ptr<Links>>& keep) {
  std::vector<FaultTally> t(s.faults.size());
  for (size_t i = 0; i < s.faults.size() && i < keep.size(); ++i)
    if (const auto* f = dynamic_cast<const FaultLinks*>(keep[i].get())) t[i] = FaultTally{f->seen(), f->fired()};
  return t;
}

std::vector<std::string> unfired_faults(const Scenario& s, const std::vector<FaultTally>& total) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.faults.size() && i < total.size(); ++i) {
    const FaultSpec& f = s.faults[i];
    const NemesisInfo* n = find_nemesis(f.kind);
    if (!n || !n->wrap || total[i].fired > 0) continue;
    out.push_back(fmt::format("faults[{}] ({}, line {}) never fired: {}", i, f.kind, f.line,
                              n->unfired ? n->unfired(s, f, total[i])
                                         : fmt::format("it saw {} transfer(s) it applies to and changed none",
                                                       total[i].seen)));
  }
  return out;
}

}  // namespace collcheck
