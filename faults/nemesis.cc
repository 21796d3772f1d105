#include "faults/nemesis.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace collcheck {

namespace {
// The registry: one line per nemesis.
const std::array<const NemesisInfo*, 6> kNemeses = {&kMismatchedShape, &kMisordered,  &kMissingWait,
                                                    &kSlowLink,        &kStalledRank, &kCorruptedPayload};
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
  for (const auto& f : s.faults) {
    const NemesisInfo* n = find_nemesis(f.kind);
    if (!n || !n->wrap) continue;
    if (auto w = n->wrap(*cur, f, rank)) {
      cur = w.get();
      keep.push_back(std::move(w));
    }
  }
  return *cur;
}

}  // namespace collcheck
