// The oracle's product model multiplies magnitudes with their exponents kept
// apart (harness/check/oracle_scaled.h). ScaledProducts, its fast way, must
// give the Scaled that multiplying the same factors one by one gives (all of
// them, those below 1 and those above 1), bit for
// bit: factors of every kind (narrow floats' few-bit values, any double,
// subnormal doubles, values next to 1) and counts up to p = 600; and past its
// renormalization (every kRun factors), 5 kRun + 5 factors whose significands
// are next to 0.5, whose product without it would fall below long double's
// range. On a fresh seed (printed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "harness/check/oracle_scaled.h"

using namespace collcheck::oracle_detail;

namespace {

double draw_factor(std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0:  // an fp8-like value: 4 significant bits, exponent within +-8
      return std::ldexp(static_cast<double>(8 + rng() % 8), static_cast<int>(rng() % 17) - 11);
    case 1: {  // any positive finite double
      uint64_t bits = rng() & ~(uint64_t{1} << 63);
      if (((bits >> 52) & 0x7ff) == 0x7ff) bits &= ~(uint64_t{1} << 62);
      double v;
      std::memcpy(&v, &bits, 8);
      return v == 0 ? 1.0 : v;
    }
    case 2:  // a subnormal double
      return std::ldexp(static_cast<double>(1 + rng() % 1000), -1074);
    case 3:  // next to 1, on either side
      return 1.0 + (static_cast<double>(rng() % 2001) - 1000.0) * 0x1.0p-40;
    default:
      return 1.0;
  }
}

bool same(const Scaled& a, const Scaled& b) { return a.e == b.e && std::memcmp(&a.m, &b.m, 10) == 0; }

TEST(ScaledProducts, GiveTheScaledOfTheSameFactorsInTheSameOrderBitForBit) {
  const uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  std::printf("[ seed     ] %#llx\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t n = trial % 100 == 0 ? 5 * ScaledProducts::kRun + 5 : 1 + rng() % 600;
    Scaled chain = Scaled::of(1), chain_below = Scaled::of(1), chain_above = Scaled::of(1);
    std::vector<double> factors;
    const bool long_run = n > 600;
    for (size_t i = 0; i < n; ++i) {
      // A long run's factors have significands next to 0.5, so that their
      // product's would fall below long double's range without the renormalization.
      const double v = long_run ? std::ldexp(1.0 + static_cast<double>(rng() % 1000) * 0x1.0p-40,
                                             static_cast<int>(rng() % 41) - 20)
                                : draw_factor(rng);
      factors.push_back(v);
      chain = chain * Scaled::of(v);
      if (v < 1) chain_below = chain_below * Scaled::of(v);
      if (v > 1) chain_above = chain_above * Scaled::of(v);
      double f;
      int64_t e;
      ScaledProducts::split(v, f, e);
      ASSERT_GE(f, 0.5);
      ASSERT_LT(f, 1.0);
      ASSERT_EQ(std::ldexp(f, static_cast<int>(e)), v);
    }
    const ScaledProducts fast = ScaledProducts::of(factors);
    const Scaled& got = fast.all();
    ASSERT_TRUE(same(got, chain)) << "trial " << trial << ", " << n << " factors: " << static_cast<double>(got.m)
                                  << " 2^" << got.e << " against " << static_cast<double>(chain.m) << " 2^" << chain.e;
    ASSERT_TRUE(same(fast.below(), chain_below)) << "trial " << trial << " (the factors below 1)";
    ASSERT_TRUE(same(fast.above(), chain_above)) << "trial " << trial << " (the factors above 1)";
    ++checked;
  }
  std::printf("%d products the same bit for bit\n", checked);
}

}  // namespace
