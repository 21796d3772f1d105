#include "harness/peers/implementation.h"

#include <fmt/format.h>

#include "harness/check/oracle.h"

#include <algorithm>
#include <cmath>

namespace collcheck {

namespace {

class ReferenceImplementation final : public Implementation {
 public:
  explicit ReferenceImplementation(const AlgorithmInfo& a) : algo_(a), name_(a.name) {}
  const std::string& name() const override { return name_; }
  void all_reduce(const AllReduceArgs& a) const override { algo_.run(a); }
  bool reduction_order(int p, size_t count, size_t index, std::span<const int> nodes,
                       std::vector<int>& postfix) const override {
    algo_.order(p, count, index, nodes, postfix);
    return true;
  }
  bool follows_nodes() const override { return algo_.follows_nodes; }

 private:
  const AlgorithmInfo& algo_;
  std::string name_;
};

}  // namespace

std::vector<uint64_t> compare_select_outcomes(const Reduction& red, std::span<const uint64_t> values) {
  std::vector<uint64_t> out;
  const Expectation e = expect_element(red, values);
  if (e.kind == CheckKind::Bitwise) out.push_back(e.bits);
  bool any_nan = false;
  for (uint64_t v : values) any_nan |= std::isnan(element_to_double(red.dtype, v));
  const double want = e.kind == CheckKind::Bitwise ? element_to_double(red.dtype, e.bits) : 1.0;
  for (uint64_t v : values) {
    const double d = element_to_double(red.dtype, v);
    // A NaN operand makes a comparison false, so the select returns the NaN
    // or the other operand depending on the side: a NaN can survive, or hide
    // every value reduced before it. With a NaN present, any input can come out.
    if (any_nan) out.push_back(v);
    // Of +0 and -0 (equal), the select keeps one by position.
    else if (d == 0.0 && want == 0.0) out.push_back(v);
  }
  return out;
}

std::vector<uint64_t> tree_outcomes(std::span<const uint64_t> values, uint64_t (*step)(DType, uint64_t, uint64_t),
                                    DType t) {
  const size_t n = values.size();
  auto add = [](std::vector<uint64_t>& v, uint64_t x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  if (n > 8) {
    // Every tree's intermediate values lie in the closure of the inputs under
    // the step, so the closure is a sound superset of the outcomes. For the
    // selecting steps this is used with (max/min, which return an operand, or
    // a canonical NaN) it is the inputs plus that NaN. The two folds used here
    // before rejected a NaN that Gloo's halving-doubling kept at p = 9.
    std::vector<uint64_t> out;
    for (uint64_t v : values) add(out, v);
    for (size_t done = 0; done < out.size() && out.size() < 4096; ++done)
      for (size_t j = 0; j <= done && out.size() < 4096; ++j) {
        add(out, step(t, out[done], out[j]));
        add(out, step(t, out[j], out[done]));
      }
    return out;
  }
  std::vector<std::vector<uint64_t>> reach(size_t{1} << n);
  for (size_t i = 0; i < n; ++i) reach[size_t{1} << i] = {values[i]};
  for (size_t s = 1; s < reach.size(); ++s) {
    if ((s & (s - 1)) == 0) continue;
    // Every ordered split of s into two non-empty parts (left, right).
    for (size_t a = (s - 1) & s; a > 0; a = (a - 1) & s)
      for (uint64_t x : reach[a])
        for (uint64_t y : reach[s ^ a]) add(reach[s], step(t, x, y));
  }
  return reach.back();
}

bool Deviation::allows(const Reduction& red, std::span<const uint64_t> values, uint64_t got) const {
  if (admits) return admits(red, values, got);
  const auto o = outcomes(red, values);
  return std::find(o.begin(), o.end(), got) != o.end();
}

void add_nccl_result(const Reduction& red, std::span<const uint64_t> values, std::vector<uint64_t>& out) {
  const Expectation e = expect_element(red, values);
  if (e.kind == CheckKind::Bitwise) out.push_back(e.bits);
}

ImplPtr reference_implementation(std::string_view name) {
  const AlgorithmInfo* a = find_algorithm(name);
  if (!a) return nullptr;
  return std::make_shared<ReferenceImplementation>(*a);
}

}  // namespace collcheck
