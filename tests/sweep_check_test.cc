// The sweep's per-row verification reports every kind of wrong output, so the
// command exits non-zero whenever an element is wrong.
#include <gtest/gtest.h>

#include "harness/model/data.h"
#include "harness/run/sweep.h"

using namespace collcheck;

namespace {
struct Fixture {
  int p = 4;
  size_t n = 257;
  Reduction red = resolve_reduction(DType::Int32, RedOp::Sum, 4);
  std::vector<std::vector<int32_t>> in, out;
  std::vector<const void*> pin, pout, pafter;
  Fixture() {
    in.assign(static_cast<size_t>(p), std::vector<int32_t>(n));
    out.assign(static_cast<size_t>(p), std::vector<int32_t>(n, 0));
    for (int r = 0; r < p; ++r)
      fill_input(in[static_cast<size_t>(r)].data(), n, DType::Int32, RedOp::Sum, p, r, 9, DataClass::Random);
    for (size_t i = 0; i < n; ++i) {
      uint32_t s = 0;
      for (int r = 0; r < p; ++r) s += static_cast<uint32_t>(in[static_cast<size_t>(r)][i]);
      for (int r = 0; r < p; ++r) out[static_cast<size_t>(r)][i] = static_cast<int32_t>(s);
    }
  }
  OutputCheck check(const std::vector<std::vector<int32_t>>& after) {
    pin.clear();
    pout.clear();
    pafter.clear();
    for (int r = 0; r < p; ++r) {
      pin.push_back(in[static_cast<size_t>(r)].data());
      pout.push_back(out[static_cast<size_t>(r)].data());
      pafter.push_back(after[static_cast<size_t>(r)].data());
    }
    return check_outputs(red, pin, pout, pafter, n);
  }
};
}  // namespace

TEST(SweepCheck, CorrectOutputsPass) {
  Fixture f;
  auto after = f.in;
  const OutputCheck c = f.check(after);
  EXPECT_EQ(c.wrong, 0u) << c.first_problem;
  EXPECT_TRUE(c.first_problem.empty());
}

TEST(SweepCheck, WrongValueOnEveryRankIsCaughtByTheOracle) {
  Fixture f;
  for (auto& o : f.out) o[100] += 1;
  const OutputCheck c = f.check(f.in);
  EXPECT_EQ(c.wrong, 1u);
  EXPECT_NE(c.first_problem.find("element 100"), std::string::npos) << c.first_problem;
  SweepResult res;
  res.total_wrong = c.wrong;
  EXPECT_EQ(res.exit_code(), 1);
}

TEST(SweepCheck, OneRankDifferingIsCaught) {
  Fixture f;
  f.out[2][7] ^= 4;
  const OutputCheck c = f.check(f.in);
  EXPECT_EQ(c.wrong, 1u);
  EXPECT_NE(c.first_problem.find("rank 2 differs from rank 0 in 1 elements, first at element 7"), std::string::npos)
      << c.first_problem;
}

TEST(SweepCheck, ModifiedInputIsCaught) {
  Fixture f;
  auto after = f.in;
  after[3][0] += 1;
  const OutputCheck c = f.check(after);
  EXPECT_EQ(c.wrong, 1u);
  EXPECT_NE(c.first_problem.find("rank 3's input buffer was modified"), std::string::npos) << c.first_problem;
}
