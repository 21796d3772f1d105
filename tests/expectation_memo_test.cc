// The oracle's memo of expectations (ExpectationMemo): every element gets
// what expect_element gives it, under the same enumeration budget, whether or
// not its inputs came before; the memo remembers where inputs repeat and steps
// aside where they do not. Fresh seed, printed (COLLCHECK_SEED to repeat one).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "harness/check/expectation_memo.h"
#include "harness/check/oracle.h"
#include "harness/model/data.h"
#include "impl/element_ops.h"
#include "tests/test_seed.h"

using namespace collcheck;

namespace {

using testutil::test_seed;

// p ranks' inputs of `count` elements of one data class, as verify makes them.
std::vector<std::vector<std::byte>> inputs(DType t, RedOp op, int p, size_t count, uint64_t seed, DataClass cls) {
  std::vector<std::vector<std::byte>> in(static_cast<size_t>(p), std::vector<std::byte>(count * dtype_size(t)));
  for (int r = 0; r < p; ++r) fill_input(in[static_cast<size_t>(r)].data(), count, t, op, p, r, seed, cls);
  return in;
}

std::vector<uint64_t> element(const std::vector<std::vector<std::byte>>& in, DType t, size_t i) {
  std::vector<uint64_t> v(in.size());
  for (size_t r = 0; r < in.size(); ++r) v[r] = load_element(t, in[r].data(), i);
  return v;
}

bool same(const Expectation& a, const Expectation& b) {
  return a.kind == b.kind && a.bits == b.bits && a.exact == b.exact && a.bound == b.bound && a.lo == b.lo &&
         a.hi == b.hi && a.allowed == b.allowed;
}

struct MemoRun {
  size_t lookups = 0, hits = 0, mismatches = 0;
  bool active_after = false;
  std::string first_mismatch;
};

// Every element through the memo under a fresh budget of `steps`, then every
// element through expect_element under another: the two sequences must be
// equal, element for element.
MemoRun memo_against_full_way(const Reduction& red, const std::vector<std::vector<std::byte>>& in, size_t count,
                          size_t steps) {
  MemoRun run;
  std::vector<Expectation> with_memo;
  with_memo.reserve(count);
  {
    const EnumerationBudget budget(steps);
    ExpectationMemo memo(red, in.size(), count);
    for (size_t i = 0; i < count; ++i) with_memo.push_back(memo.expect(element(in, red.dtype, i)));
    run.lookups = memo.lookups();
    run.hits = memo.hits();
    run.active_after = memo.active();
  }
  const EnumerationBudget budget(steps);
  for (size_t i = 0; i < count; ++i) {
    const Expectation e = expect_element(red, element(in, red.dtype, i));
    if (same(e, with_memo[i])) continue;
    if (run.mismatches++ == 0)
      run.first_mismatch = fmt::format("element {}: memo {}, full way {}", i, with_memo[i].describe(red.dtype),
                                       e.describe(red.dtype));
  }
  return run;
}

}  // namespace

// Narrow floats and float32, sums, averages, pre-multiplied sums and
// products, the data classes whose values repeat and the random one, at a
// small and a larger world; products of extremes spend the budget part way
// through, so that an element's expectation depends on what came before it.
TEST(ExpectationMemo, EveryElementGetsTheFullWaysExpectationUnderTheSameBudget) {
  const uint64_t seed = test_seed();
  const size_t count = ExpectationMemo::kMinCount;
  size_t total_hits = 0, budget_cases = 0;
  for (DType t : {DType::Fp8E4M3, DType::Fp8E5M2, DType::Float16, DType::BFloat16, DType::Float32})
    for (RedOp op : {RedOp::Sum, RedOp::Avg, RedOp::PreMulSum, RedOp::Prod})
      for (DataClass cls : {DataClass::Exact, DataClass::Special, DataClass::Extreme, DataClass::Random})
        for (int p : {3, 6}) {
          const Reduction red = resolve_reduction(t, op, p, 3.0);
          const auto in = inputs(t, op, p, count, seed ^ (static_cast<uint64_t>(t) << 8) ^ static_cast<uint64_t>(op), cls);
          const size_t consults = enumeration_budget_consults();
          const MemoRun run = memo_against_full_way(red, in, count, size_t{1} << 16);
          if (enumeration_budget_consults() != consults) ++budget_cases;
          total_hits += run.hits;
          EXPECT_EQ(run.mismatches, 0u) << dtype_name(t) << " " << op_name(op) << " " << data_class_name(cls)
                                        << " p=" << p << ": " << run.first_mismatch;
        }
  // The comparison means something only if both situations occurred.
  EXPECT_GT(total_hits, 100000u);
  EXPECT_GT(budget_cases, 0u);
}

// fp8 exact sums draw three values a rank: at p = 6 nearly every element's
// inputs came before. Random float32 inputs never repeat: the memo steps
// aside after its trial. A call below the minimum count takes no memo.
TEST(ExpectationMemo, RemembersRepeatingInputsAndStepsAsideOtherwise) {
  const uint64_t seed = test_seed();
  const size_t count = ExpectationMemo::kMinCount;
  {
    const Reduction red = resolve_reduction(DType::Fp8E4M3, RedOp::Sum, 6);
    const MemoRun run = memo_against_full_way(red, inputs(DType::Fp8E4M3, RedOp::Sum, 6, count, seed, DataClass::Exact),
                                          count, size_t{1} << 16);
    EXPECT_EQ(run.mismatches, 0u) << run.first_mismatch;
    EXPECT_GT(run.hits, count * 9 / 10) << "of " << run.lookups;
    EXPECT_TRUE(run.active_after);
  }
  {
    const Reduction red = resolve_reduction(DType::Float32, RedOp::Sum, 8);
    const MemoRun run = memo_against_full_way(red, inputs(DType::Float32, RedOp::Sum, 8, count, seed, DataClass::Random),
                                          count, size_t{1} << 16);
    EXPECT_EQ(run.mismatches, 0u) << run.first_mismatch;
    EXPECT_LT(run.hits, 100u);
    EXPECT_FALSE(run.active_after);
  }
  {
    const Reduction red = resolve_reduction(DType::Fp8E4M3, RedOp::Sum, 6);
    const ExpectationMemo memo(red, 6, ExpectationMemo::kMinCount - 1);
    EXPECT_FALSE(memo.active());
  }
}
