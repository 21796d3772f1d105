// Soundness of the oracle over every reduction order, on data built to break it:
// products that cross the underflow and overflow thresholds on the way, sums
// that overflow or saturate (fp8) in some orders only, subnormals, the largest
// finite values, +-0, +-Inf and NaN, at p from 2 to 64. Every element is reduced
// in several random binary trees (and in rank order, and along a ring) with the
// element semantics, and every outcome must be accepted. A rejection is a false
// alarm that would fail a correct implementation.
//
// Each run uses the fixed seeds and one fresh seed, printed. The number of
// elements per seed is COLLCHECK_ORACLE_ELEMENTS (default 100000 per seed); the
// long runs in the README use millions.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "harness/check/oracle.h"
#include "impl/element_ops.h"

using namespace collcheck;

namespace {

const DType kFloats[] = {DType::Float16, DType::BFloat16, DType::Float32,
                         DType::Float64, DType::Fp8E4M3,  DType::Fp8E5M2};
const RedOp kOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Avg, RedOp::PreMulSum};

// One value of magnitude about 2^e2 (clamped into the format), random sign.
uint64_t near_power(DType t, double e2, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> frac(1.0, 2.0);
  const double v = std::ldexp(frac(rng), static_cast<int>(std::floor(e2)));
  return to_element_bits(t, (rng() & 1) ? -v : v);
}

uint64_t special(DType t, std::mt19937_64& rng) {
  const FloatInfo lim = float_info(t);
  const double choices[] = {0.0,
                            -0.0,
                            lim.max_finite,
                            -lim.max_finite,
                            lim.min_subnormal,
                            -lim.min_subnormal,
                            lim.min_normal,
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN(),
                            1.0};
  return to_element_bits(t, choices[rng() % std::size(choices)]);
}

// The inputs of one element: p values chosen so that some partial results of
// some orders land near a threshold of the format.
std::vector<uint64_t> adversarial(DType t, RedOp op, int p, std::mt19937_64& rng) {
  const FloatInfo lim = float_info(t);
  const double emax = std::log2(lim.max_finite), emin_n = std::log2(lim.min_normal),
               emin_s = std::log2(lim.min_subnormal);
  std::vector<uint64_t> xs(static_cast<size_t>(p));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const unsigned mode = static_cast<unsigned>(rng() % 7);
  if (op == RedOp::Prod) {
    // Log-magnitudes that sum to a target near a threshold, spread widely so
    // that partial products wander far above and below it.
    const double targets[] = {emax, emin_n, emin_s, 0.0, emax + 2, emin_s - 2};
    const double target = targets[rng() % std::size(targets)] + (unit(rng) - 0.5) * 4;
    const double spread = mode < 2 ? 0.0 : (mode < 4 ? emax / 2 : emax * 1.5);
    std::vector<double> e(static_cast<size_t>(p));
    double total = 0;
    for (auto& v : e) total += v = (unit(rng) - 0.5) * 2 * spread;
    for (auto& v : e) v += (target - total) / p;
    for (int r = 0; r < p; ++r) xs[static_cast<size_t>(r)] = near_power(t, std::clamp(e[static_cast<size_t>(r)], emin_s, emax), rng);
  } else {
    // Magnitudes near M/k for a random k (sums that overflow or saturate in some
    // orders only), or near the subnormal range, or wildly mixed.
    for (int r = 0; r < p; ++r) {
      double e2;
      switch (mode) {
        case 0: e2 = emax - std::log2(1 + static_cast<double>(rng() % static_cast<unsigned>(p))); break;
        case 1: e2 = emin_n + (unit(rng) - 0.5) * 6; break;
        case 2: e2 = emin_s + unit(rng) * (emax - emin_s); break;
        case 6: e2 = (unit(rng) - 0.5) * 4; break;  // ordinary data: where p <= 4 is checked exactly
        default: e2 = emax - unit(rng) * 3; break;
      }
      xs[static_cast<size_t>(r)] = near_power(t, std::clamp(e2, emin_s, emax), rng);
    }
  }
  // Sprinkle special values.
  const unsigned specials = rng() % 4 == 0 ? 1 + static_cast<unsigned>(rng() % 3) : 0;
  for (unsigned i = 0; i < specials; ++i) xs[rng() % xs.size()] = special(t, rng);
  return xs;
}

// Reduces `ys` in a random binary tree.
uint64_t random_tree(DType t, Combine c, std::vector<uint64_t> ys, std::mt19937_64& rng) {
  while (ys.size() > 1) {
    const size_t i = rng() % ys.size();
    size_t j = rng() % (ys.size() - 1);
    if (j >= i) ++j;
    ys[std::min(i, j)] = (rng() & 1) ? combine_bits(t, c, ys[i], ys[j]) : combine_bits(t, c, ys[j], ys[i]);
    ys.erase(ys.begin() + static_cast<long>(std::max(i, j)));
  }
  return ys[0];
}

uint64_t left_fold(DType t, Combine c, const std::vector<uint64_t>& ys, size_t start) {
  uint64_t acc = ys[start % ys.size()];
  for (size_t k = 1; k < ys.size(); ++k) acc = combine_bits(t, c, acc, ys[(start + k) % ys.size()]);
  return acc;
}

size_t elements_per_seed() {
  if (const char* s = std::getenv("COLLCHECK_ORACLE_ELEMENTS")) return std::strtoull(s, nullptr, 10);
  return 100000;
}

struct Counts {
  size_t elements = 0, outcomes = 0;
  size_t by_kind[kCheckKinds] = {};
};

void run_seed(uint64_t seed, size_t elements, Counts& counts) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> scalar(-4.0, 4.0);
  for (size_t n = 0; n < elements; ++n) {
    const DType t = kFloats[rng() % std::size(kFloats)];
    const RedOp op = kOps[rng() % std::size(kOps)];
    // p: small often (enumeration), up to 16 often, up to 64 sometimes.
    const unsigned bucket = static_cast<unsigned>(rng() % 8);
    const int p = 2 + static_cast<int>(rng() % (bucket < 3 ? 7 : bucket < 6 ? 15 : 63));
    const double s = (rng() % 4 == 0) ? std::ldexp(1.0, static_cast<int>(rng() % 40) - 20) : scalar(rng);
    const Reduction red = resolve_reduction(t, op, p, s);
    const std::vector<uint64_t> xs = adversarial(t, op, p, rng);
    const Expectation e = expect_element(red, xs);
    ++counts.elements;
    ++counts.by_kind[static_cast<size_t>(e.kind)];
    std::vector<uint64_t> ys;
    for (uint64_t x : xs) ys.push_back(premul_bits(red, x));
    std::vector<uint64_t> got = {left_fold(t, red.combine, ys, 0), left_fold(t, red.combine, ys, rng() % ys.size())};
    for (int k = 0; k < 4; ++k) got.push_back(random_tree(t, red.combine, ys, rng));
    for (uint64_t g : got) {
      ++counts.outcomes;
      if (judge(red, e, g).ok) continue;
      std::string ins;
      for (size_t r = 0; r < xs.size(); ++r) ins += fmt::format("\n  rank {}: {}", r, format_element(t, xs[r]));
      FAIL() << "seed " << seed << " element " << n << ": " << dtype_name(t) << " " << op_name(op) << " p=" << p
             << " scalar " << s << "\noracle: " << e.describe(t) << "\nan order gave " << format_element(t, g)
             << "\ninputs:" << ins;
    }
  }
}

}  // namespace

TEST(OracleSoundness, EveryReductionTreeIsAcceptedOnAdversarialData) {
  const uint64_t fresh = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
  const size_t per_seed = elements_per_seed();
  Counts counts;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t seed : {uint64_t{1}, uint64_t{2}, uint64_t{3}, fresh}) {
    std::printf("[ oracle  ] seed %#llx: %zu elements\n", static_cast<unsigned long long>(seed), per_seed);
    std::fflush(stdout);
    run_seed(seed, per_seed, counts);
    if (HasFatalFailure()) return;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ oracle  ] %zu elements, %zu outcomes accepted in %.1f s; check kinds: bitwise %zu, bound %zu, "
              "one-of %zu, interval %zu\n",
              counts.elements, counts.outcomes, secs, counts.by_kind[0], counts.by_kind[1], counts.by_kind[2],
              counts.by_kind[3]);
  // The data must reach every check kind, or the test proves less than it says.
  for (size_t k = 0; k < kCheckKinds; ++k)
    EXPECT_GT(counts.by_kind[k], counts.elements / 100) << check_kind_name(static_cast<CheckKind>(k));
}

// The cases from the issue that the old fallback rules rejected, pinned.
TEST(OracleSoundness, CasesTheOldRulesRejected) {
  // float64 prod, two subnormals: the exact product 2^-1031-ish underflows to 0
  // in every order; the old reference (double-double) said 0 +- 0 at p = 9.
  {
    const Reduction red = resolve_reduction(DType::Float64, RedOp::Prod, 2);
    const std::vector<uint64_t> xs = {0x0002000000000000ull, 0x0002a7f8ba055e4dull};
    EXPECT_TRUE(judge(red, expect_element(red, xs), 0).ok);
  }
  // fp8 e4m3 sum that saturates on the way: -448 + 448 + 448 is 0 or 448.
  {
    const Reduction red = resolve_reduction(DType::Fp8E4M3, RedOp::Sum, 3);
    const std::vector<uint64_t> xs = {0xfe, 0x7e, 0x7e};
    const Expectation e = expect_element(red, xs);
    EXPECT_TRUE(judge(red, e, 0x00).ok) << e.describe(DType::Fp8E4M3);
    EXPECT_TRUE(judge(red, e, 0x7e).ok) << e.describe(DType::Fp8E4M3);
  }
  // The same at p = 12 (interval, not enumeration): 6 x 448, 6 x -448.
  {
    const Reduction red = resolve_reduction(DType::Fp8E4M3, RedOp::Sum, 12);
    std::vector<uint64_t> xs(12, 0x7e);
    for (size_t i = 6; i < 12; ++i) xs[i] = 0xfe;
    const Expectation e = expect_element(red, xs);
    EXPECT_EQ(e.kind, CheckKind::Interval) << e.describe(DType::Fp8E4M3);
    EXPECT_TRUE(judge(red, e, 0x00).ok) << e.describe(DType::Fp8E4M3);
    EXPECT_TRUE(judge(red, e, 0x7e).ok) << e.describe(DType::Fp8E4M3);
    EXPECT_TRUE(judge(red, e, 0xfe).ok) << e.describe(DType::Fp8E4M3);
    EXPECT_FALSE(judge(red, e, 0x7f).ok) << "NaN is not reachable";
  }
  // e5m2 prod: -Inf x 1 saturates to -M, then x 0 gives -0; 0 x -Inf gives NaN.
  {
    const Reduction red = resolve_reduction(DType::Fp8E5M2, RedOp::Prod, 3);
    const std::vector<uint64_t> xs = {0xfc, 0x00, 0x3c};
    const Expectation e = expect_element(red, xs);
    EXPECT_TRUE(judge(red, e, 0x80).ok) << e.describe(DType::Fp8E5M2);
    EXPECT_TRUE(judge(red, e, 0x7e).ok) << e.describe(DType::Fp8E5M2);
    EXPECT_FALSE(judge(red, e, 0x00).ok) << "the sign of the zero is the XOR of the signs";
  }
}

// Tight where it is sound: a subnormal product that cannot reach zero in any
// order rejects a flush to zero (FTZ), and a product that cannot overflow
// rejects Inf.
TEST(OracleSoundness, IntervalsStillRejectWhatNoOrderGives) {
  const Reduction red = resolve_reduction(DType::Float64, RedOp::Prod, 2);
  const std::vector<uint64_t> xs = {to_element_bits(DType::Float64, 1e-160), to_element_bits(DType::Float64, 1e-160)};
  const Expectation e = expect_element(red, xs);
  const uint64_t right = to_element_bits(DType::Float64, 1e-160 * 1e-160);
  EXPECT_TRUE(judge(red, e, right).ok) << e.describe(DType::Float64);
  EXPECT_FALSE(judge(red, e, 0).ok) << e.describe(DType::Float64);
  EXPECT_FALSE(judge(red, e, to_element_bits(DType::Float64, INFINITY)).ok);

  // p = 20: ten factors of 2^100 and ten of 2^-110: every order stays in range
  // except those that multiply the small ones first (underflow), so zero may
  // come out, but never Inf, and never a value above the largest partial bound.
  const Reduction red20 = resolve_reduction(DType::Float64, RedOp::Prod, 20);
  std::vector<uint64_t> ys;
  for (int i = 0; i < 10; ++i) ys.push_back(to_element_bits(DType::Float64, std::ldexp(1.5, 100)));
  for (int i = 0; i < 10; ++i) ys.push_back(to_element_bits(DType::Float64, std::ldexp(1.25, -110)));
  const Expectation e20 = expect_element(red20, ys);
  EXPECT_EQ(e20.kind, CheckKind::Interval) << e20.describe(DType::Float64);
  EXPECT_TRUE(judge(red20, e20, 0).ok) << e20.describe(DType::Float64);
  EXPECT_FALSE(judge(red20, e20, to_element_bits(DType::Float64, INFINITY)).ok) << e20.describe(DType::Float64);
  EXPECT_FALSE(judge(red20, e20, to_element_bits(DType::Float64, -1.0)).ok) << "the sign is known";
}
