// The oracle's enumeration of every reduction order's outcome: the 1-byte
// dtypes' own way (sets of 256 bits, steps looked up) gives what the general
// way (a hash table per set) gives, on any inputs, NaN and Inf patterns
// included: the same outcomes, the same combining steps, and the same
// failures when a set passes its cap or the steps pass the budget. Fresh
// seed, printed (COLLCHECK_SEED to repeat one).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "harness/check/oracle_detail.h"
#include "impl/semantics.h"

using namespace collcheck;

TEST(OracleEnumeration, TheByteWayGivesTheGeneralWaysOutcomesStepsAndFailures) {
  const char* env = std::getenv("COLLCHECK_SEED");
  const uint64_t seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::printf("[ seed    ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  size_t compared = 0, failed_on_cap_or_budget = 0, succeeded = 0;
  for (int round = 0; round < 6000; ++round) {
    const DType t = (rng() & 1) ? DType::Fp8E4M3 : DType::Fp8E5M2;
    const RedOp op = std::array{RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min}[rng() % 4];
    const int p = 1 + static_cast<int>(rng() % 8);
    const Reduction red = resolve_reduction(t, op, p);
    std::vector<uint64_t> ys(static_cast<size_t>(p));
    // Any pattern, or values near 1 (sets that stay small), or a mix.
    const int kind = static_cast<int>(rng() % 3);
    for (auto& y : ys) y = (kind == 0 || (kind == 2 && (rng() & 1))) ? rng() % 256 : 0x30 + rng() % 24 + (rng() & 0x80);
    // Caps and budgets from tight (failures) to the oracle's own.
    const size_t cap = (rng() & 1) ? 1 + rng() % 16 : 64;
    const size_t budget = (rng() & 1) ? 1 + rng() % 2000 : 60000;
    std::vector<uint64_t> bytes_out, general_out;
    size_t bytes_work = 0, general_work = 0;
    const bool bytes_ok = oracle_detail::all_order_outcomes_with_work(red, ys, bytes_out, cap, budget, bytes_work, false);
    const bool general_ok =
        oracle_detail::all_order_outcomes_with_work(red, ys, general_out, cap, budget, general_work, true);
    ASSERT_EQ(bytes_ok, general_ok) << "round " << round << " p " << p << " cap " << cap << " budget " << budget;
    ASSERT_EQ(bytes_work, general_work) << "round " << round;
    if (bytes_ok) {
      ASSERT_EQ(bytes_out, general_out) << "round " << round;
      ++succeeded;
    } else {
      ++failed_on_cap_or_budget;
    }
    ++compared;
  }
  std::printf("[ enum    ] %zu inputs: %zu enumerated, %zu stopped by the cap or the budget\n", compared, succeeded,
              failed_on_cap_or_budget);
  EXPECT_GT(succeeded, 1000u);
  EXPECT_GT(failed_on_cap_or_budget, 500u);
}
