// The small sum's expectations (SmallSumOracle): wherever it answers, its
// answer is expect_element's, field for field; it answers for the elements
// of float sums over 2 to 5 ranks where no order can overflow, and leaves the
// rest (Inf, NaN, an order that may overflow or saturate) to the full way.
// Fresh seed, printed (COLLCHECK_SEED to repeat one).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "harness/check/expectation_memo.h"
#include "harness/check/oracle.h"
#include "harness/check/small_sum.h"
#include "harness/model/data.h"
#include "impl/element_ops.h"
#include "tests/test_seed.h"

using namespace collcheck;

namespace {

using testutil::test_seed;

bool same(const Expectation& a, const Expectation& b) {
  return a.kind == b.kind && a.bits == b.bits && a.exact == b.exact && a.bound == b.bound && a.lo == b.lo &&
         a.hi == b.hi && a.allowed == b.allowed;
}

constexpr DType kFloats[] = {DType::Float16, DType::BFloat16, DType::Float32,
                             DType::Float64, DType::Fp8E4M3, DType::Fp8E5M2};

struct Tally {
  size_t answered = 0, declined = 0, mismatches = 0, one_of = 0, bitwise = 0;
  std::string first;
};

// Every element both ways; an answer must equal the full way's. The full way
// runs with no enumeration budget left: where some order may overflow or
// saturate, it then answers with its interval, never with the set of
// outcomes that the small sum derives, so an answer given there shows.
void compare(const Reduction& red, const std::vector<std::vector<uint64_t>>& elements, Tally& t) {
  const EnumerationBudget none(0);
  const SmallSumOracle small(red, elements.empty() ? 0 : elements[0].size());
  ASSERT_TRUE(small.applies()) << dtype_name(red.dtype);
  Expectation e;
  e.allowed = {1, 2, 3};  // left over from an earlier element: an answer must replace every field
  e.lo = -5;
  for (const auto& vals : elements) {
    if (!small.expect(vals, e)) {
      ++t.declined;
      continue;
    }
    ++t.answered;
    ++(e.kind == CheckKind::OneOf ? t.one_of : t.bitwise);
    const Expectation full = expect_element(red, vals);
    if (same(e, full)) continue;
    if (t.mismatches++ == 0) {
      std::string ins;
      for (uint64_t v : vals) ins += format_element(red.dtype, v) + " ";
      t.first = fmt::format("{} {} p={} inputs {}: small sum {}, full way {}", dtype_name(red.dtype), op_name(red.op),
                            vals.size(), ins, e.describe(red.dtype), full.describe(red.dtype));
    }
  }
}

// `count` elements of p ranks: one of verify's data classes, or raw random
// bits (any pattern, NaN and Inf included) when cls is empty.
std::vector<std::vector<uint64_t>> elements(DType t, RedOp op, int p, size_t count, uint64_t seed,
                                            std::optional<DataClass> cls) {
  std::vector<std::vector<uint64_t>> out(count, std::vector<uint64_t>(static_cast<size_t>(p)));
  const uint64_t mask = dtype_size(t) == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * dtype_size(t))) - 1;
  for (size_t i = 0; i < count; ++i)
    for (int r = 0; r < p; ++r)
      out[i][static_cast<size_t>(r)] = cls ? input_element(t, op, p, r, i, seed, *cls)
                                           : splitmix64(seed ^ (i * 131 + static_cast<uint64_t>(r))) & mask;
  return out;
}

}  // namespace

// Every float dtype; sum, avg and premulsum (scalars 3, -0.25 and one near
// the largest finite value, so that premultiplying overflows); 2 to 5 ranks;
// each data class and raw bits.
TEST(SmallSum, EveryAnswerIsTheFullWays) {
  const uint64_t seed = test_seed();
  Tally total;
  for (DType t : kFloats)
    for (RedOp op : {RedOp::Sum, RedOp::Avg, RedOp::PreMulSum})
      for (double scalar : {3.0, -0.25, 0.75 * float_info(t).max_finite})
        for (int p = 2; p <= 5; ++p) {
          if (op != RedOp::PreMulSum && scalar != 3.0) continue;
          const Reduction red = resolve_reduction(t, op, p, scalar);
          const uint64_t s = seed ^ (static_cast<uint64_t>(t) << 8 | static_cast<uint64_t>(op) << 4 | static_cast<uint64_t>(p));
          for (DataClass cls : kAllDataClasses) compare(red, elements(t, op, p, 400, s, cls), total);
          compare(red, elements(t, op, p, 400, s, std::nullopt), total);
        }
  EXPECT_EQ(total.mismatches, 0u) << total.first;
  // Not vacuous: most elements answered, both kinds among them, and some left to the full way.
  EXPECT_GT(total.answered, total.declined);
  EXPECT_GT(total.one_of, 1000u);
  EXPECT_GT(total.bitwise, 1000u);
  EXPECT_GT(total.declined, 1000u);
  std::printf("[ tally   ] %zu answered (%zu one-of, %zu bitwise), %zu left to the full way\n", total.answered,
              total.one_of, total.bitwise, total.declined);
}

// Sums whose magnitudes sit at the overflow test's edge: the largest finite
// value over p, times 1 +- small steps, so that some elements fall on each
// side of the full way's test and of the margin.
TEST(SmallSum, AtTheEdgeOfOverflowTheAnswerIsStillTheFullWays) {
  Tally total;
  for (DType t : kFloats)
    for (int p = 2; p <= 5; ++p) {
      const Reduction red = resolve_reduction(t, RedOp::Sum, p);
      const double M = float_info(t).max_finite;
      std::vector<std::vector<uint64_t>> els;
      for (int k = -40; k <= 40; ++k)
        for (int neg = 0; neg < 2; ++neg) {
          const double v = M / p * (1 + k * 0x1p-9) * (neg ? -1 : 1);
          std::vector<uint64_t> vals(static_cast<size_t>(p), to_element_bits(t, v));
          vals[0] = to_element_bits(t, v * 0.999);
          els.push_back(vals);
        }
      compare(red, els, total);
    }
  EXPECT_EQ(total.mismatches, 0u) << total.first;
  EXPECT_GT(total.answered, 0u);
  EXPECT_GT(total.declined, 0u);
}

// Where it does not apply: products, max, min, integers, one rank, six ranks,
// and five once one_of_ranks() is 4 (the full way's Bound there).
TEST(SmallSum, AppliesOnlyWhereTheFullWayTakesTheSetOfOutcomes) {
  EXPECT_TRUE(SmallSumOracle(resolve_reduction(DType::Float16, RedOp::Avg, 5), 5).applies());
  EXPECT_FALSE(SmallSumOracle(resolve_reduction(DType::Float16, RedOp::Prod, 3), 3).applies());
  EXPECT_FALSE(SmallSumOracle(resolve_reduction(DType::Float32, RedOp::Max, 3), 3).applies());
  EXPECT_FALSE(SmallSumOracle(resolve_reduction(DType::Int32, RedOp::Sum, 3), 3).applies());
  EXPECT_FALSE(SmallSumOracle(resolve_reduction(DType::Float32, RedOp::Sum, 1), 1).applies());
  EXPECT_FALSE(SmallSumOracle(resolve_reduction(DType::Float32, RedOp::Sum, 6), 6).applies());
  set_one_of_ranks(4);
  const bool five = SmallSumOracle(resolve_reduction(DType::Float32, RedOp::Sum, 5), 5).applies();
  set_one_of_ranks(kOneOfDefaultRanks);
  EXPECT_FALSE(five);
  // A call's memo derives through it: the same expectations as before.
  const Reduction red = resolve_reduction(DType::BFloat16, RedOp::Sum, 4);
  ExpectationMemo memo(red, 4, 8);
  const std::vector<uint64_t> vals = {0x3f80, 0x3380, 0xbf80, 0x3f81};  // 1, 2^-24, -1, 1 + 2^-7
  EXPECT_TRUE(same(memo.expect(vals), expect_element(red, vals)));
  EXPECT_EQ(memo.expect(vals).kind, CheckKind::OneOf);
}
