// The oracle's enumeration of every reduction order's outcome: the 1-byte
// dtypes' own way (sets of 256 bits, steps looked up) gives what the general
// way (a hash table per set) gives, on any inputs, NaN and Inf patterns
// included: the same outcomes, the same combining steps, and the same
// failures when a set passes its cap or the steps pass the budget. Fresh
// seed, printed (COLLCHECK_SEED to repeat one).
#include <gtest/gtest.h>

#include <cstdio>
#include <array>
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
    // fp8 (their own way) three times in four; the others for p <= 2, where
    // every dtype skips the general way's tables.
    const DType t = rng() % 4 ? ((rng() & 1) ? DType::Fp8E4M3 : DType::Fp8E5M2)
                              : std::array{DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}[rng() % 4];
    const bool bytes = dtype_size(t) == 1;
    const RedOp op = std::array{RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min}[rng() % 4];
    const int p = bytes ? 1 + static_cast<int>(rng() % 8) : 1 + static_cast<int>(rng() % 3);
    const Reduction red = resolve_reduction(t, op, p);
    std::vector<uint64_t> ys(static_cast<size_t>(p));
    // Any pattern, or values near 1 (sets that stay small), or a mix.
    const int kind = static_cast<int>(rng() % 3);
    const int bits = 8 * static_cast<int>(dtype_size(t));
    const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    for (auto& y : ys)
      y = (kind == 0 || (kind == 2 && (rng() & 1))) ? rng() & mask
                                                    : ((0x30 + rng() % 24 + (rng() & 0x80)) << (bits - 8));
    const size_t budget_low = rng() % 4;  // 0 and 1 test p = 2's one step
    // Caps and budgets from tight (failures) to the oracle's own (special
    // values' 64; the one-of sets' 256, which no set of 1-byte values passes).
    const size_t caps[4] = {1 + rng() % 16, 1 + rng() % 16, 64, 256};
    const size_t cap = caps[rng() % 4];
    const size_t budget = (rng() & 1) ? (rng() % 8 ? 1 + rng() % 2000 : budget_low) : 60000;
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
