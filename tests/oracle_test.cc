// The oracle: which comparison applies, that its bounds are sound (no false
// alarms for any reduction order) and tight (a dropped or doubled contribution
// fails).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cmath>
#include <limits>
#include <random>

#include "harness/model/data.h"
#include "harness/check/oracle.h"
#include "harness/check/output_check.h"
#include "impl/element_ops.h"

using namespace collcheck;

namespace {
const DType kFloats[] = {DType::Float16, DType::BFloat16, DType::Float32,
                         DType::Float64, DType::Fp8E4M3,  DType::Fp8E5M2};

// Reduces `ys` (already pre-multiplied) with the element semantics in a random
// binary-tree order: what some correct algorithm could return.
uint64_t random_order(const Reduction& red, std::vector<uint64_t> ys, std::mt19937& rng) {
  while (ys.size() > 1) {
    std::uniform_int_distribution<size_t> pick(0, ys.size() - 1);
    const size_t i = pick(rng);
    size_t j = pick(rng);
    while (j == i) j = pick(rng);
    ys[std::min(i, j)] = combine_bits(red.dtype, red.combine, ys[i], ys[j]);
    ys.erase(ys.begin() + static_cast<long>(std::max(i, j)));
  }
  return ys[0];
}

std::vector<uint64_t> premul_all(const Reduction& red, const std::vector<uint64_t>& xs) {
  std::vector<uint64_t> ys;
  for (uint64_t x : xs) ys.push_back(premul_bits(red, x));
  return ys;
}
// The fast paths' summary against the full way's: the same counts per kind,
// the same wrong elements and first one with the same text; the error in
// bound units (computed in double on the fast path) equal to 1e-9 relative,
// give or take `units_slack`: the full way's error of its reference sum, in
// bound units (see ref_units).
void expect_same_verdicts(const CheckSummary& fast, const CheckSummary& full, const std::string& what,
                          double units_slack = 0) {
  EXPECT_EQ(fast.checked, full.checked) << what;
  EXPECT_EQ(fast.wrong, full.wrong) << what;
  for (size_t k = 0; k < kCheckKinds; ++k) EXPECT_EQ(fast.by_kind[k], full.by_kind[k]) << what << " kind " << k;
  EXPECT_EQ(fast.first_wrong, full.first_wrong) << what;
  EXPECT_EQ(fast.first_wrong_detail, full.first_wrong_detail) << what;
  if (std::isfinite(full.max_err_units))
    EXPECT_NEAR(fast.max_err_units, full.max_err_units, 1e-9 * std::max(1.0, full.max_err_units) + units_slack) << what;
  else
    EXPECT_EQ(fast.max_err_units, full.max_err_units) << what;
}
// The full way measures a result's error from a long double sum of the p
// inputs, off the exact sum by up to 2p 2^-63 of the magnitudes; the bound is
// at least (p-1) unit roundoffs of them. For float64 that is up to 2^-8 of a
// bound unit (for float32, 2^-37); the fast path measures from the exact sum.
double ref_units(DType t, int p) {
  return p > 1 && dtype_is_float(t) ? 2.0 * p * 0x1p-63 / ((p - 1) * float_info(t).unit_roundoff) : 0;
}
}  // namespace

TEST(Oracle, IntegersMaxMinAndExactDataAreBitwise) {
  const Reduction r = resolve_reduction(DType::Int32, RedOp::Sum, 3);
  EXPECT_EQ(expect_element(r, std::vector<uint64_t>{1, 2, 3}).kind, CheckKind::Bitwise);
  const Reduction m = resolve_reduction(DType::Float32, RedOp::Max, 3);
  EXPECT_EQ(expect_element(m, std::vector<uint64_t>{to_element_bits(DType::Float32, 0.1), 0, 0}).kind,
            CheckKind::Bitwise);
  const Reduction s = resolve_reduction(DType::Float16, RedOp::Sum, 4);
  std::vector<uint64_t> exact;
  for (double v : {1.0, 2.5, -3.25, 100.0}) exact.push_back(to_element_bits(DType::Float16, v));
  const Expectation e = expect_element(s, exact);
  EXPECT_EQ(e.kind, CheckKind::Bitwise);
  EXPECT_EQ(e.bits, to_element_bits(DType::Float16, 100.25));
  // Inexact: at p = 4 the set of the 15 trees' outcomes (issue 31), at p = 6
  // the bound.
  std::vector<uint64_t> inexact;
  for (double v : {1.0, 1e-3, 2048.0, 0.1}) inexact.push_back(to_element_bits(DType::Float16, v));
  EXPECT_EQ(expect_element(s, inexact).kind, CheckKind::OneOf);
  inexact.push_back(to_element_bits(DType::Float16, 0.3));
  inexact.push_back(to_element_bits(DType::Float16, 0.7));
  EXPECT_EQ(expect_element(resolve_reduction(DType::Float16, RedOp::Sum, 6), inexact).kind, CheckKind::Bound);
}

// Soundness: for every float dtype and op, results of random reduction orders
// on random data are always accepted. A false alarm here would make every
// implementation that reduces in another order look broken.
TEST(Oracle, BoundsAcceptEveryReductionOrder) {
  std::mt19937 rng(2024);
  size_t by_kind[4] = {0, 0, 0, 0};
  for (DType t : kFloats) {
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Avg, RedOp::PreMulSum}) {
      for (int p : {2, 3, 5, 8, 16}) {
        const Reduction red = resolve_reduction(t, op, p, 3.0);
        for (int c = 0; c < 300; ++c) {
          std::vector<uint64_t> xs;
          for (int r = 0; r < p; ++r)
            xs.push_back(input_element(t, op, p, r, static_cast<size_t>(c), 99, DataClass::Mixed));
          const Expectation e = expect_element(red, xs);
          ++by_kind[static_cast<size_t>(e.kind)];
          const auto ys = premul_all(red, xs);
          for (int k = 0; k < 4; ++k) {
            const uint64_t got = random_order(red, ys, rng);
            const Verdict v = judge(red, e, got);
            ASSERT_TRUE(v.ok) << dtype_name(t) << " " << op_name(op) << " p=" << p << ": expected "
                              << e.describe(t) << ", order gave " << format_element(t, got);
          }
        }
      }
    }
  }
  EXPECT_GT(by_kind[static_cast<size_t>(CheckKind::Bound)], 1000u);
  EXPECT_GT(by_kind[static_cast<size_t>(CheckKind::Bitwise)], 1000u);
}

// The avg bound (p > 5) is against the ideal sum(x)/p, so an implementation
// that sums first and divides last passes too. At p <= 5 the oracle holds it
// to NCCL's pre-multiplied sum exactly (the next test).
TEST(Oracle, AvgBoundAcceptsSumThenDivide) {
  std::mt19937 rng(7);
  size_t bounded = 0;
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (int p : {6, 7, 9, 16}) {
      const Reduction red = resolve_reduction(t, RedOp::Avg, p);
      const Reduction sum = resolve_reduction(t, RedOp::Sum, p);
      for (int c = 0; c < 500; ++c) {
        std::vector<uint64_t> xs;
        for (int r = 0; r < p; ++r) xs.push_back(input_element(t, RedOp::Sum, p, r, static_cast<size_t>(c), 5, DataClass::Random));
        const uint64_t s = random_order(sum, xs, rng);
        const uint64_t divided = to_element_bits(t, element_to_double(t, s) / p);
        const Expectation e = expect_element(red, xs);
        // Where the pre-multiplied values are exact, NCCL's result is one bit
        // pattern and the oracle is bitwise: post-dividing is then a semantic
        // difference that must be reported, not accepted.
        if (e.kind != CheckKind::Bound) continue;
        ++bounded;
        ASSERT_TRUE(judge(red, e, divided).ok) << dtype_name(t) << " p=" << p << " " << e.describe(t);
      }
    }
  }
  EXPECT_GT(bounded, 4000u);
}

// Issue 31: at p = 2 a float sum, product, avg or premulsum has one right
// result, and at p = 3 and 4 the set of every tree's outcome is checked. A
// result off by one unit in the last place, which the bound accepted, is
// rejected wherever no order gives it; every order's own result still passes.
TEST(Oracle, SmallWorldsAreCheckedAgainstEveryOrdersExactOutcome) {
  std::mt19937 rng(11);
  for (DType t : kFloats) {
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Avg, RedOp::PreMulSum}) {
      for (int p : {2, 3, 4}) {
        const Reduction red = resolve_reduction(t, op, p, 1.5);
        size_t rejected = 0, tried = 0;
        for (int c = 0; c < 400; ++c) {
          std::vector<uint64_t> xs;
          for (int r = 0; r < p; ++r)
            xs.push_back(input_element(t, op, p, r, static_cast<size_t>(c), 9, DataClass::Random));
          const Expectation e = expect_element(red, xs);
          ASSERT_NE(e.kind, CheckKind::Bound) << dtype_name(t) << " " << op_name(op) << " p=" << p;
          std::vector<uint64_t> ys;
          for (uint64_t x : xs) ys.push_back(premul_bits(red, x));
          const uint64_t right = random_order(red, ys, rng);
          ASSERT_TRUE(judge(red, e, right).ok) << e.describe(t);
          const double v = element_to_double(t, right);
          if (!std::isfinite(v) || v == 0) continue;
          // One unit in the last place up: accepted only if some order gives it.
          const uint64_t ulp_up = right + 1;
          if (!std::isfinite(element_to_double(t, ulp_up))) continue;
          ++tried;
          if (!judge(red, e, ulp_up).ok) ++rejected;
          if (p == 2 && e.kind == CheckKind::Bitwise) {
            EXPECT_FALSE(judge(red, e, ulp_up).ok) << e.describe(t);
          }
        }
        // Many one-ulp moves are caught (at p = 2 every one of them; at p = 4
        // the 15 trees of a product reach a neighbour of one another's result
        // more often than those of a sum do).
        EXPECT_GT(rejected * 4, tried) << dtype_name(t) << " " << op_name(op) << " p=" << p;
      }
    }
  }
}

// Tightness: drop or double one rank's contribution. On exactly representable
// data the oracle must choose the bitwise comparison, and then every mutation
// that changes the value is caught.
TEST(Oracle, DroppedOrDoubledContributionFailsBitwiseOnExactData) {
  std::mt19937 rng(31);
  for (DType t : kAllDTypes) {
    for (RedOp op : {RedOp::Sum, RedOp::PreMulSum, RedOp::Prod}) {
      for (int p : {2, 3, 4, 8, 16}) {
        const Reduction red = resolve_reduction(t, op, p, 3.0);
        size_t observable = 0, trials = 0;
        for (size_t i = 0; i < 64; ++i) {
          std::vector<uint64_t> xs;
          for (int r = 0; r < p; ++r) xs.push_back(input_element(t, op, p, r, i, 11, DataClass::Exact));
          const Expectation e = expect_element(red, xs);
          ASSERT_EQ(e.kind, CheckKind::Bitwise) << dtype_name(t) << " " << op_name(op) << " p=" << p;
          const std::vector<uint64_t> ys = premul_all(red, xs);
          // Mutate the first rank whose contribution is not the identity.
          size_t victim = 0;
          while (victim + 1 < ys.size() && (op == RedOp::Prod ? element_to_double(t, ys[victim]) == 1.0
                                                               : element_to_double(t, ys[victim]) == 0.0))
            ++victim;
          std::vector<uint64_t> dropped = ys, doubled = ys;
          dropped.erase(dropped.begin() + static_cast<long>(victim));
          doubled.push_back(ys[victim]);
          for (const auto& bad : {dropped, doubled}) {
            ++trials;
            const uint64_t got = random_order(red, bad, rng);
            if (got == e.bits) continue;  // x_1 was the identity: no oracle can see it
            ++observable;
            EXPECT_FALSE(judge(red, e, got).ok) << dtype_name(t) << " " << op_name(op) << " p=" << p;
          }
        }
        // Integer products of random bytes are mostly 0 mod 2^bits, where no
        // mutation is visible; every other case must mostly be observable.
        if (dtype_is_float(t) || op != RedOp::Prod) {
          EXPECT_GT(observable * 2, trials) << "too few observable mutations for " << dtype_name(t) << " "
                                          << op_name(op) << " p=" << p;
        }
      }
    }
  }
}

// Where the oracle itself falls back to its bound (inexact data), the bound is
// still tighter than one contribution: with every |x| in [1, 2), dropping or
// doubling a rank moves the sum by at least 1, and for these (dtype, p) the
// bound E(p-1) * sum|x| < E(p-1) * 2p < 1. Both facts are checked, not assumed.
TEST(Oracle, BoundIsTighterThanOneContribution) {
  struct Limit {
    DType t;
    int max_p;
  };
  const Limit limits[] = {{DType::Float64, 16}, {DType::Float32, 16}, {DType::Float16, 16},
                          {DType::BFloat16, 8}, {DType::Fp8E4M3, 3},  {DType::Fp8E5M2, 2}};
  std::mt19937 rng(5);
  for (const auto& lim : limits) {
    size_t bounded = 0;
    for (int p = 2; p <= lim.max_p; ++p) {
      ASSERT_LT(steps_error(lim.t, p - 1) * 2 * p, 1.0) << dtype_name(lim.t) << " p=" << p;
      const Reduction red = resolve_reduction(lim.t, RedOp::Sum, p);
      std::uniform_real_distribution<double> mag(1.0, 2.0);
      for (int c = 0; c < 200; ++c) {
        std::vector<uint64_t> xs;
        for (int r = 0; r < p; ++r) xs.push_back(to_element_bits(lim.t, mag(rng)));
        const Expectation e = expect_element(red, xs);
        ASSERT_TRUE(e.kind == CheckKind::Bound || e.kind == CheckKind::Bitwise || e.kind == CheckKind::OneOf)
            << e.describe(lim.t);
        if (e.kind == CheckKind::Bound) ++bounded;
        std::vector<uint64_t> dropped(xs.begin() + 1, xs.end()), doubled = xs;
        doubled.push_back(xs[0]);
        EXPECT_TRUE(judge(red, e, random_order(red, xs, rng)).ok) << e.describe(lim.t);
        EXPECT_FALSE(judge(red, e, random_order(red, dropped, rng)).ok) << dtype_name(lim.t) << " p=" << p;
        EXPECT_FALSE(judge(red, e, random_order(red, doubled, rng)).ok) << dtype_name(lim.t) << " p=" << p;
      }
    }
    // (Up to p = 5 the oracle checks the exact set of outcomes instead: fp8's
    // bound is tighter than one contribution only below that.)
    if (lim.max_p > kOneOfDefaultRanks) {
      EXPECT_GT(bounded, 0u) << dtype_name(lim.t) << ": the oracle never used its bound, so it was not tested";
    }
  }
}

TEST(Oracle, OrderDependentOverflowAcceptsExactlyTheReachableOutcomes) {
  // float16: max + max overflows to Inf, max + (-max) is 0. Orders give
  // (max + max) + -max = Inf, (max + -max) + max = max.
  const Reduction red = resolve_reduction(DType::Float16, RedOp::Sum, 3);
  const uint64_t mx = 0x7bff, nmx = 0xfbff;
  const Expectation e = expect_element(red, std::vector<uint64_t>{mx, mx, nmx});
  ASSERT_EQ(e.kind, CheckKind::OneOf) << e.describe(DType::Float16);
  EXPECT_TRUE(judge(red, e, 0x7c00).ok);
  EXPECT_TRUE(judge(red, e, mx).ok);
  EXPECT_FALSE(judge(red, e, 0).ok);
  EXPECT_FALSE(judge(red, e, 0x7e00).ok);  // NaN is not reachable
  EXPECT_EQ(e.allowed.size(), 2u);
  // +Inf and -Inf: NaN in every order.
  const Expectation n = expect_element(red, std::vector<uint64_t>{0x7c00, 0xfc00, 0x3c00});
  EXPECT_EQ(n.kind, CheckKind::Bitwise);
  EXPECT_TRUE(judge(red, n, 0x7e01).ok);  // any NaN
  EXPECT_FALSE(judge(red, n, 0x7c00).ok);
  // fp8 saturation: 448 + 448 - 448 is 448 in every order (saturates, never NaN).
  const Reduction r8 = resolve_reduction(DType::Fp8E4M3, RedOp::Sum, 3);
  const Expectation s8 = expect_element(r8, std::vector<uint64_t>{0x7e, 0x7e, 0xfe});
  EXPECT_TRUE(judge(r8, s8, 0x7e).ok) << s8.describe(DType::Fp8E4M3);
  EXPECT_FALSE(judge(r8, s8, 0x7f).ok);
}

TEST(Oracle, CheckAllReducePinpointsTheFirstWrongElement) {
  const int p = 3;
  const size_t n = 50;
  const Reduction red = resolve_reduction(DType::Float32, RedOp::Sum, p);
  std::vector<std::vector<float>> in(p, std::vector<float>(n));
  std::vector<const void*> ptrs;
  std::vector<float> out(n);
  for (int r = 0; r < p; ++r) {
    fill_input(in[static_cast<size_t>(r)].data(), n, DType::Float32, RedOp::Sum, p, r, 3, DataClass::Mixed);
    ptrs.push_back(in[static_cast<size_t>(r)].data());
  }
  for (size_t i = 0; i < n; ++i) out[i] = (in[0][i] + in[1][i]) + in[2][i];
  CheckSummary ok = check_all_reduce(red, ptrs, out.data(), n);
  EXPECT_EQ(ok.wrong, 0u);
  EXPECT_LE(ok.max_err_units, 1.0);
  out[17] = in[0][17] + in[2][17];  // rank 1 dropped
  CheckSummary bad = check_all_reduce(red, ptrs, out.data(), n);
  EXPECT_EQ(bad.wrong, 1u);
  ASSERT_TRUE(bad.first_wrong);
  EXPECT_EQ(*bad.first_wrong, 17u);
  EXPECT_NE(bad.first_wrong_detail.find("element 17"), std::string::npos) << bad.first_wrong_detail;
  EXPECT_NE(bad.first_wrong_detail.find("rank 1:"), std::string::npos) << bad.first_wrong_detail;
}

// Found by `collcheck verify` (seed 1, case 53): the exact value of a float64
// avg was computed as (sum of x) / p, and two inputs near the largest double
// overflowed that sum to -inf, so the oracle rejected a correct result. The
// exact mean is now summed as x_i / p.
// (At p = 2 the oracle is now bitwise; p = 6 keeps the bound this was about.)
TEST(Oracle, Float64AvgNearTheLargestDoubleHasAFiniteExactValue) {
  const uint64_t a = 0xffeeeb3185b6f8e1ull;  // -1.73694933e+308
  const uint64_t b = 0xffe0000000000000ull;  // -8.98846567e+307
  {
    const Reduction red = resolve_reduction(DType::Float64, RedOp::Avg, 2);
    const Expectation e = expect_element(red, std::vector<uint64_t>{a, b});
    // What every reduction order gives: fl(a * 0.5) + fl(b * 0.5).
    const uint64_t got = to_element_bits(DType::Float64, element_to_double(DType::Float64, a) * 0.5 +
                                                             element_to_double(DType::Float64, b) * 0.5);
    EXPECT_TRUE(judge(red, e, got).ok) << e.describe(DType::Float64);
  }
  const Reduction red = resolve_reduction(DType::Float64, RedOp::Avg, 6);
  const std::vector<uint64_t> in = {a, b, a, b, b, b};
  const Expectation e = expect_element(red, in);
  ASSERT_EQ(e.kind, CheckKind::Bound) << e.describe(DType::Float64);
  EXPECT_TRUE(std::isfinite(static_cast<double>(e.exact)));
  double sum = 0;
  for (uint64_t x : in) sum += element_to_double(DType::Float64, premul_bits(red, x));
  EXPECT_TRUE(judge(red, e, to_element_bits(DType::Float64, sum)).ok) << e.describe(DType::Float64);
}

// Found by TheFastPathsGiveTheFullWaysVerdicts (seed 345223627, round 56):
// a float64 sum whose result is 1.117 bound units from the exact sum, and
// within the bound of the full way's long double sum, which is 2^-64 off
// the exact one. The fast path called it right; the full way calls it
// wrong. The fast path now leaves a result that close to the bound to the
// full way, so both say wrong.
TEST(Oracle, AFloat64SumNearTheBoundGetsTheFullWaysVerdict) {
  const Reduction red = resolve_reduction(DType::Float64, RedOp::Sum, 3);
  const std::vector<double> in = {-0x1.3db439e210f53p-28, -0x1.1ad16p-1, -0x1.1f714p-1};
  const double got = -0x1.1d215013db43bp+0;
  std::vector<const void*> ptrs;
  for (const double& x : in) ptrs.push_back(&x);
  const CheckSummary full = check_all_reduce_elementwise(red, ptrs, &got, 1);
  const CheckSummary fast = check_all_reduce(red, ptrs, &got, 1);
  EXPECT_EQ(full.wrong, 1u) << full.first_wrong_detail;
  expect_same_verdicts(fast, full, "float64 p=3", ref_units(DType::Float64, 3));
  // One ulp nearer the exact sum, both say right.
  const double near = -0x1.1d215013db43ap+0;
  EXPECT_EQ(check_all_reduce_elementwise(red, ptrs, &near, 1).wrong, 0u);
  expect_same_verdicts(check_all_reduce(red, ptrs, &near, 1), check_all_reduce_elementwise(red, ptrs, &near, 1),
                       "float64 p=3, one ulp nearer", ref_units(DType::Float64, 3));
}

// Found by TheFastPathsGiveTheFullWaysVerdicts (seed 739271654, round 25):
// float64 inputs whose positive and negative magnitudes each stay clear of
// overflow, but add up past the largest double. The fast path's sum of
// magnitudes became Inf, so its bound did, and it passed a result wrong by
// 1.5e308. It now leaves such an element to the full way (long double).
TEST(Oracle, AFloat64SumWhoseMagnitudesOverflowADoubleGetsTheFullWaysVerdict) {
  const Reduction red = resolve_reduction(DType::Float64, RedOp::Sum, 6);
  const std::vector<double> in = {-0x1.bp+4, -0x1.00775462123a3p+1021, 0x1.7p+4,
                                  0x1p+6,    0x1.e257c04fe8104p+1023,  -0x1.82e32p-1};
  std::vector<const void*> ptrs;
  for (const double& x : in) ptrs.push_back(&x);
  const double wrong = -0x1.3f54869764089p+995;
  const CheckSummary full = check_all_reduce_elementwise(red, ptrs, &wrong, 1);
  EXPECT_EQ(full.wrong, 1u);
  expect_same_verdicts(check_all_reduce(red, ptrs, &wrong, 1), full, "float64 p=6", ref_units(DType::Float64, 6));
  // The rank-order fold is right, on both ways.
  double fold = in[0];
  for (size_t r = 1; r < in.size(); ++r) fold += in[r];
  EXPECT_EQ(check_all_reduce_elementwise(red, ptrs, &fold, 1).wrong, 0u);
  expect_same_verdicts(check_all_reduce(red, ptrs, &fold, 1), check_all_reduce_elementwise(red, ptrs, &fold, 1),
                       "float64 p=6, the fold", ref_units(DType::Float64, 6));
}

// check_all_reduce's fast paths (the kernels' fold for the order-free
// classes, the double-arithmetic decision for plain float sums) give the
// verdicts of the full way, element for element: the same counts per check
// kind, the same wrong elements and the same first one with the same text.
// Inputs mix every class of value (and ties near the exactness limit and the
// bound); results are the rank-order fold, nudged by a few units in the last
// place, or replaced. The reported error in bound units is computed in
// double on the fast path: equal to 1e-9 relative. Fresh seed, printed.
TEST(Oracle, TheFastPathsGiveTheFullWaysVerdicts) {
  const uint64_t seed = std::getenv("COLLCHECK_SEED") ? std::strtoull(std::getenv("COLLCHECK_SEED"), nullptr, 10) : std::random_device{}();
  std::printf("[ seed    ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const size_t n = 3000;
  size_t bound_checked = 0, bound_wrong = 0;
  for (int round = 0; round < 120; ++round) {
    const DType t = std::array{DType::Float32, DType::Float64, DType::Int32, DType::Float16, DType::BFloat16}[rng() % 5];
    const RedOp op = std::array{RedOp::Sum, RedOp::Sum, RedOp::Max, RedOp::Min, RedOp::Prod, RedOp::Avg}[rng() % 6];
    const int p = 1 + static_cast<int>(rng() % 8);
    const Reduction red = resolve_reduction(t, op, p);
    const size_t sz = dtype_size(t);
    std::vector<std::vector<std::byte>> in(static_cast<size_t>(p), std::vector<std::byte>(n * sz));
    std::vector<const void*> ptrs;
    for (auto& v : in) {
      for (size_t i = 0; i < n; ++i) {
        uint64_t bits;
        switch (rng() % 6) {
          case 0: bits = rng(); break;  // any bits: NaNs, infinities, subnormals
          case 1: bits = to_element_bits(t, static_cast<double>(static_cast<int>(rng() % 64) - 32)); break;  // exact data
          case 2: bits = to_element_bits(t, std::ldexp(1.0, static_cast<int>(rng() % 8))); break;  // powers of two: ties
          default: bits = to_element_bits(t, std::ldexp(static_cast<double>(static_cast<int64_t>(rng() % 2000001) - 1000000), -20));
        }
        store_element(t, v.data(), i, bits);
      }
      ptrs.push_back(v.data());
    }
    // The rank-order fold as the result, then nudged.
    std::vector<std::byte> result(n * sz);
    for (size_t i = 0; i < n; ++i) {
      uint64_t acc = premul_bits(red, load_element(t, ptrs[0], i));
      for (int r = 1; r < p; ++r)
        acc = combine_bits(t, red.combine, acc, premul_bits(red, load_element(t, ptrs[static_cast<size_t>(r)], i)));
      if (red.postdiv) acc = visit_dtype(t, [&](auto tag) -> uint64_t {
          using Ops = ElementOps<decltype(tag)>;
          return Ops::to_bits(Ops::postdiv(Ops::from_bits(acc), red.divisor));
        });
      switch (rng() % 10) {
        case 0: acc += 1; break;
        case 1: acc -= 1; break;
        case 2: acc += rng() % 64; break;
        case 3: acc = rng(); break;
        default: break;
      }
      store_element(t, result.data(), i, acc);
    }
    const CheckSummary fast = check_all_reduce(red, ptrs, result.data(), n);
    const CheckSummary full = check_all_reduce_elementwise(red, ptrs, result.data(), n);
    const std::string what = fmt::format("round {}: {} {} p={}", round, dtype_name(t), static_cast<int>(op), p);
    expect_same_verdicts(fast, full, what, ref_units(t, p));
    if (::testing::Test::HasFailure()) return;
    if (t == DType::Float32 || t == DType::Float64) {
      bound_checked += full.by_kind[static_cast<size_t>(CheckKind::Bound)];
      if (op == RedOp::Sum) bound_wrong += full.wrong;
    }
  }
  // The bound path ran, on right and on wrong results.
  EXPECT_GT(bound_checked, 10000u);
  EXPECT_GT(bound_wrong, 100u);
}

// The float32 sum's vector lanes (FastSum::check8, eight elements at a time
// under AVX2) decide most elements when the inputs are finite, so this test
// feeds them finite data: values of every magnitude (subnormals and values
// near the overflow threshold included), exact integers (the bitwise class),
// powers of two, opposite pairs that cancel, a rare Inf or NaN, and results
// that are the fold, nudged by an ulp or more, with a sign flipped, or
// replaced. Lengths leave tails of 0-7 elements for the scalar loop. The
// verdicts must be the full way's, element for element. Fresh seed, printed.
TEST(Oracle, TheFloatSumsVectorLanesGiveTheFullWaysVerdicts) {
  const uint64_t seed = std::random_device{}();
  std::printf("[ seed    ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  size_t by_kind[kCheckKinds] = {}, wrong = 0;
  for (int round = 0; round < 200; ++round) {
    const int p = 1 + static_cast<int>(rng() % 8);
    const size_t n = 1 + rng() % 4000;
    const Reduction red = resolve_reduction(DType::Float32, RedOp::Sum, p);
    const int style = static_cast<int>(rng() % 4);  // one data class per round, so the lanes see whole blocks of it
    std::vector<std::vector<float>> in(static_cast<size_t>(p), std::vector<float>(n));
    std::vector<const void*> ptrs;
    for (auto& v : in) {
      for (size_t i = 0; i < n; ++i) {
        float x;
        switch (rng() % 1000 == 0 ? 9 : style) {
          case 0: x = static_cast<float>(static_cast<int>(rng() % 2001) - 1000); break;  // exact sums
          case 1: x = std::ldexp(static_cast<float>(static_cast<int64_t>(rng() % 2000001) - 1000000), static_cast<int>(rng() % 40) - 20); break;
          case 2: x = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024, static_cast<int>(rng() % 300) - 150); break;  // subnormal to huge
          case 3: x = static_cast<float>(static_cast<double>(rng() >> 11) / 9007199254740992.0 - 0.5) * (rng() % 2 ? 1.0f : 3.4e38f / 8); break;  // near overflow
          default: x = rng() % 2 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
        }
        v[i] = x;
      }
      ptrs.push_back(v.data());
    }
    if (p >= 2 && rng() % 4 == 0)  // the last rank cancels the first: exact zeros and tiny remainders
      for (size_t i = 0; i < n; ++i) in[static_cast<size_t>(p - 1)][i] = -in[0][i];
    std::vector<float> result(n);
    for (size_t i = 0; i < n; ++i) {
      float acc = in[0][i];
      for (int r = 1; r < p; ++r) acc += in[static_cast<size_t>(r)][i];
      uint32_t b = std::bit_cast<uint32_t>(acc);
      switch (rng() % 12) {
        case 0: b += 1; break;
        case 1: b -= 1; break;
        case 2: b += static_cast<uint32_t>(rng() % 64); break;
        case 3: b ^= 0x80000000u; break;
        case 4: b = static_cast<uint32_t>(rng()); break;
        default: break;
      }
      result[i] = std::bit_cast<float>(b);
    }
    const CheckSummary fast = check_all_reduce(red, ptrs, result.data(), n);
    const CheckSummary full = check_all_reduce_elementwise(red, ptrs, result.data(), n);
    const std::string what = fmt::format("round {}: style {} p={} n={}", round, style, p, n);
    expect_same_verdicts(fast, full, what);
    if (::testing::Test::HasFailure()) return;
    for (size_t k = 0; k < kCheckKinds; ++k) by_kind[k] += full.by_kind[k];
    wrong += full.wrong;
  }
  std::printf("[ classes ] bitwise %zu, bound %zu, other %zu; wrong %zu\n", by_kind[static_cast<size_t>(CheckKind::Bitwise)],
              by_kind[static_cast<size_t>(CheckKind::Bound)],
              by_kind[static_cast<size_t>(CheckKind::OneOf)] + by_kind[static_cast<size_t>(CheckKind::Interval)], wrong);
  EXPECT_GT(by_kind[static_cast<size_t>(CheckKind::Bitwise)], 10000u);
  EXPECT_GT(by_kind[static_cast<size_t>(CheckKind::Bound)], 10000u);
  EXPECT_GT(wrong, 10000u);
}

// The canary frame around every output: filled a period of the pattern at a
// time, checked only outside the payload. A frame with no payload is all
// canary, so a stray_write over it compares every byte with the pattern.
TEST(OutputCheck, CanariesAreWholeAndEveryStrayByteShows) {
  std::mt19937_64 rng(7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{5000}, size_t{70001}}) {
    SCOPED_TRACE(fmt::format("payload {} bytes", n));
    std::vector<std::byte> payload(n);
    for (auto& b : payload) b = static_cast<std::byte>(rng());
    auto f = framed(payload);
    ASSERT_EQ(f.size(), n + 2 * kCanary);
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), f.begin() + kCanary));
    EXPECT_FALSE(stray_write(f, n).has_value());
    auto poisoned = framed(n);
    EXPECT_FALSE(stray_write(poisoned, 0).has_value()) << "the poisoned payload is not the pattern";
    EXPECT_EQ(framed(payload, true), poisoned);
    // Every byte of the pattern is checked: one flipped byte anywhere in a
    // poisoned frame read as payload-free shows at its offset.
    for (size_t k : {size_t{0}, kCanary - 1, kCanary, kCanary + n / 2, kCanary + n, f.size() - 1}) {
      auto g = poisoned;
      g[k] ^= std::byte{0x10};
      const auto w = stray_write(g, 0);
      ASSERT_TRUE(w.has_value()) << "byte " << k;
      EXPECT_EQ(w->offset, static_cast<long>(k) - static_cast<long>(kCanary));
      // Inside the payload of a framed output, only the canaries count.
      auto h = f;
      h[k] ^= std::byte{0x10};
      EXPECT_EQ(stray_write(h, n).has_value(), k < kCanary || k >= kCanary + n) << "byte " << k;
    }
  }
}
