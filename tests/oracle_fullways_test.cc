// The oracle's fast paths and vector lanes give the verdicts of the full
// (every-way) check, near the largest doubles too; output canaries (oracle_test).
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
