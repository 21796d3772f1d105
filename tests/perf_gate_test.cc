// The performance gate's statistics (harness/run/perf_gate.h): the exact
// Wilcoxon signed-rank test against a brute-force count over every sign
// pattern, and the side-by-side comparison on rows built to be drifting but
// equal, slower, failed or short.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "harness/run/perf_gate.h"
#include "harness/run/sweep.h"
#include <cstdlib>

namespace collcheck {
namespace {

// P(W+ <= observed) by enumerating the 2^n sign patterns, mid-ranks as doubles.
double brute_force(const std::vector<double>& d) {
  std::vector<double> m;
  for (double x : d)
    if (x != 0) m.push_back(x);
  const size_t n = m.size();
  std::vector<double> rank(n);
  for (size_t i = 0; i < n; ++i) {
    double below = 0, same = 0;
    for (size_t j = 0; j < n; ++j) {
      below += std::fabs(m[j]) < std::fabs(m[i]);
      same += std::fabs(m[j]) == std::fabs(m[i]);
    }
    rank[i] = below + (same + 1) / 2;
  }
  double w = 0;
  for (size_t i = 0; i < n; ++i) w += m[i] > 0 ? rank[i] : 0;
  size_t at_most = 0;
  for (size_t mask = 0; mask < (size_t{1} << n); ++mask) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += (mask >> i & 1) ? rank[i] : 0;
    at_most += s <= w + 1e-9;
  }
  return static_cast<double>(at_most) / static_cast<double>(size_t{1} << n);
}

TEST(Wilcoxon, KnownValues) {
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_less({-1, -2, -3, -4, -5}), 1.0 / 32);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_less({1, 2, 3, 4, 5}), 1.0);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_less(std::vector<double>(11, -0.5)), 1.0 / 2048);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_less({0, 0, 0}), 1.0) << "no difference: no evidence";
  // W+ = 1 (the smallest magnitude positive): patterns with W+ <= 1 are 2 of 32.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_less({0.1, -2, -3, -4, -5}), 2.0 / 32);
}

// Above 40 differences the normal approximation: it meets the exact count at
// the boundary (n = 40 exact, the same data with one more tiny difference of
// each sign is approximate), and its extremes are right.
TEST(Wilcoxon, TheNormalApproximationAgreesWithTheExactTestAtTheBoundary) {
  std::vector<double> d;
  for (int i = 1; i <= 40; ++i) d.push_back((i % 3 == 0 ? 1.0 : -1.0) * i);
  const double exact = wilcoxon_signed_rank_less(d);
  d.push_back(0.001);
  d.push_back(-0.002);
  const double approx = wilcoxon_signed_rank_less(d);
  EXPECT_NEAR(approx, exact, 0.01) << "exact " << exact << " approx " << approx;
  EXPECT_GT(exact, 0.001);
  EXPECT_LT(exact, 0.2);
  EXPECT_LT(wilcoxon_signed_rank_less(std::vector<double>(60, -1.0)), 1e-10);
  EXPECT_GT(wilcoxon_signed_rank_less(std::vector<double>(60, 1.0)), 0.999);
}

TEST(Wilcoxon, MatchesTheCountOverEverySignPatternOnFreshSeeds) {
  // A fresh seed every run, printed; COLLCHECK_SEED replays one.
  const char* replay = std::getenv("COLLCHECK_SEED");
  const uint64_t seed = replay ? std::strtoull(replay, nullptr, 0)
                               : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("[ seed     ] COLLCHECK_SEED=%#llx\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int t = 0; t < 300; ++t) {
    const size_t n = 1 + rng() % 14;
    std::vector<double> d(n);
    // Few distinct magnitudes: ties and zeros are common.
    for (auto& x : d) x = static_cast<double>(static_cast<int>(rng() % 9) - 4) * (rng() % 2 ? 1 : 0.5);
    EXPECT_NEAR(wilcoxon_signed_rank_less(d), brute_force(d), 1e-12) << "trial " << t;
  }
}

SweepRow row(size_t bytes, std::vector<double> busbw) {
  SweepRow r;
  r.bytes = bytes;
  r.count = bytes / 4;
  r.dtype = DType::Float32;
  r.op = RedOp::Sum;
  r.busbw_samples = std::move(busbw);
  return r;
}

// Rounds whose speed drifts by a factor of 3 over the run, both sides alike.
std::vector<double> drifting(size_t k, double scale, uint64_t salt) {
  std::mt19937_64 rng(salt);
  std::vector<double> v;
  for (size_t i = 0; i < k; ++i) v.push_back(scale * (1 + 2.0 * static_cast<double>(i) / static_cast<double>(k)) *
                                             (1 + 0.02 * (static_cast<double>(rng() % 100) / 100 - 0.5)));
  return v;
}

TEST(SideBySide, DriftOnBothSidesIsNoRegressionAndHalfTheSpeedIs) {
  SweepResult r;
  r.rows = {row(65536, drifting(11, 1, 1)), row(1 << 20, drifting(11, 4, 2)),
            row(65536, drifting(11, 1, 3)), row(1 << 20, drifting(11, 2, 4))};
  const GateResult g = compare_side_by_side(r, 2, 0.05, 0.05, 9);
  ASSERT_EQ(g.rows.size(), 2u);
  EXPECT_FALSE(g.rows[0].regressed) << g.rows[0].change << " p " << g.rows[0].p_value;
  EXPECT_TRUE(g.rows[0].paired);
  EXPECT_EQ(g.rows[0].key, "float32 sum 65536 B");
  EXPECT_TRUE(g.rows[1].regressed) << g.rows[1].change << " p " << g.rows[1].p_value;
  EXPECT_NEAR(g.rows[1].change, -0.5, 0.03);
  EXPECT_EQ(gate_verdict(g), "1 row(s) regressed");
}

TEST(SideBySide, AFailedCandidateRowFailsAndBadRowsAreInputErrors) {
  SweepResult r;
  r.rows = {row(65536, drifting(11, 1, 1)), row(65536, {})};
  r.rows[1].error = "deadline";
  const GateResult g = compare_side_by_side(r, 1, 0.05, 0.05, 9);
  EXPECT_EQ(g.unusable(), 1u);
  r.rows[1].error.clear();
  r.rows[1].busbw_samples = drifting(5, 1, 2);
  EXPECT_THROW(compare_side_by_side(r, 1, 0.05, 0.05, 9), GateInputError) << "5 rounds, 9 needed";
  r.rows[0].wrong = 3;
  r.rows[1].busbw_samples = drifting(11, 1, 2);
  EXPECT_THROW(compare_side_by_side(r, 1, 0.05, 0.05, 9), GateInputError) << "a wrong baseline";
  EXPECT_THROW(compare_side_by_side(r, 2, 0.05, 0.05, 9), GateInputError) << "rows for 2 x 2";
  // 9 rounds over 100 rows: the smallest p, 2^-9, is above 0.05 / 100.
  SweepResult many;
  for (int side = 0; side < 2; ++side)
    for (size_t i = 0; i < 100; ++i) many.rows.push_back(row(4096 * (i + 1), drifting(9, side ? 0.5 : 1, i)));
  try {
    compare_side_by_side(many, 100, 0.05, 0.05, 9);
    ADD_FAILURE() << "a gate that could never fail a row ran";
  } catch (const GateInputError& e) {
    EXPECT_NE(std::string(e.what()).find("give --reps 11 or more"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace collcheck
