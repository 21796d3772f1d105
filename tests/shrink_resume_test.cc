// Shrinking resumes the value stage where a simpler value was taken
// (shrinkable_case, properties/shrink.cc), starting over from the top every
// 8 values in a row: the same minimal case as starting over after every
// value, in a fraction of the runs, and a case none of whose candidates
// fails has still had every stage's candidates tried, the value stage's
// earlier elements included. And the calls of one byte size are cut together
// before the cuts of the first call alone.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "properties/case.h"
#include "properties/generators.h"

using namespace collcheck;

namespace {

struct Shrunk {
  Case minimal;
  size_t runs = 0, steps = 0;
};

// verify's greedy loop (shrink_pass) with a predicate for the run: the first
// candidate that still fails is taken, and its own candidates come next.
Shrunk shrink(const Case& start, const std::function<bool(const Case&)>& fails, size_t max_runs = 20000) {
  Shrunk out;
  rc::Shrinkable<Case> at = shrinkable_case(start);
  for (bool progressed = true; progressed && out.runs < max_runs;) {
    progressed = false;
    auto seq = at.shrinks();
    while (auto m = seq.next()) {
      ++out.runs;
      if (!fails(m->value())) continue;
      at = *m;
      ++out.steps;
      progressed = true;
      break;
    }
  }
  out.minimal = at.value();
  return out;
}

// An int32 case of explicit inputs, one row a rank.
Case explicit_case(std::vector<std::vector<uint64_t>> values) {
  Case c;
  c.p = static_cast<int>(values.size());
  c.count = values[0].size();
  c.dtype = DType::Int32;
  c.explicit_values = true;
  c.values = std::move(values);
  return c;
}

// The case the mutant chunk_index_3_bits shrinks to, before its values do:
// p = 9, 9 elements, every value random.
Case nine_by_nine() {
  Case c;
  c.p = 9;
  c.count = 9;
  c.dtype = DType::Uint32;
  c.op = RedOp::Min;
  c.data = DataClass::Random;
  c.seed = 12345;
  c.make_explicit();
  return c;
}

}  // namespace

// A bug that needs 9 ranks, 9 elements and a nonzero value at rank 7,
// element 8 (the mutant's: a chunk index of 3 bits wraps at 8): every other
// value goes to 0 and that one to 1, in one step a value and about 960 runs.
// Starting over from the top after each value took about 55 runs more a
// value here: over 4,500 of verify's 5,000.
TEST(ShrinkResume, NineByNineValuesShrinkInUnder1500Runs) {
  const auto fails = [](const Case& c) { return c.p == 9 && c.count == 9 && c.input(7, 8) != 0; };
  const Case start = nine_by_nine();
  ASSERT_TRUE(fails(start));
  const Shrunk s = shrink(start, fails);
  for (int r = 0; r < 9; ++r)
    for (size_t i = 0; i < 9; ++i) EXPECT_EQ(s.minimal.input(r, i), (r == 7 && i == 8) ? 1u : 0u) << r << "," << i;
  EXPECT_LT(s.runs, 1500u) << "in " << s.steps << " steps";
  std::printf("[ shrunk  ] %zu steps, %zu runs\n", s.steps, s.runs);
}

// An earlier element that can go simpler only after a later one did: rank 0's
// value may be 0 only once rank 1's is 0. The resumed value stage starts at
// rank 1's element; the whole value stage runs again after it, so rank 0's
// goes to 0 too (a resumed stage alone would stop at 5).
TEST(ShrinkResume, EarlierElementsAreTriedAgainAfterALaterOneChanged) {
  const Case c = explicit_case({{5}, {3}});
  const auto fails = [](const Case& x) {
    if (x.p != 2 || x.count != 1) return false;
    const uint64_t a = x.input(0, 0), b = x.input(1, 0);
    return b == 0 || (a == 5 && b == 3);
  };
  ASSERT_TRUE(fails(c));
  const Shrunk s = shrink(c, fails);
  EXPECT_EQ(s.minimal.input(0, 0), 0u);
  EXPECT_EQ(s.minimal.input(1, 0), 0u);
}

// The structure stages still come after the values: a buffer that may lose
// an element only once a value is simple loses it.
TEST(ShrinkResume, StructureShrinksStillFollowASimplerValue) {
  const Case c = explicit_case({{9, 4}, {6, 6}, {7, 7}});
  // Fails with 3 ranks and 2 elements whatever the values; with 1 element
  // only where rank 0's value is 0.
  const auto fails = [](const Case& x) {
    return x.p == 3 && (x.count == 2 || (x.count == 1 && x.input(0, 0) == 0));
  };
  const Shrunk s = shrink(c, fails);
  EXPECT_EQ(s.minimal.count, 1u);
  EXPECT_EQ(s.minimal.input(0, 0), 0u);
}

// A cut of the buffer keeps a prefix of the values, and may need one that
// the value stage would go on to make 0: every 8 values in a row, the next
// candidates start from the top again. Here 2 elements fail only once rank
// 0's first value is 0 and while rank 1's second is not: the cut comes
// before the value stage reaches rank 1 (going on with values alone ends at
// 12 elements, all 0).
TEST(ShrinkResume, CutsAreTriedAgainBetweenRoundsOfValues) {
  const Case c = explicit_case({std::vector<uint64_t>(12, 7), std::vector<uint64_t>(12, 9)});
  const auto fails = [](const Case& x) {
    if (x.p != 2) return false;
    return x.count == 12 || (x.count == 2 && x.input(0, 0) == 0 && x.input(1, 1) != 0);
  };
  const Shrunk s = shrink(c, fails);
  EXPECT_EQ(s.minimal.count, 2u);
  EXPECT_EQ(s.minimal.input(0, 0), 0u);
  EXPECT_NE(s.minimal.input(1, 1), 0u);
}

// A bug that needs a further call of the first call's byte size (a plan
// cached by bytes): every cut of the first call alone passes, so the calls
// are cut together before any of those (fresh seed 14445939236973985573 of
// plan_cache_keyed_on_bytes spent the whole 5,000-run budget on the cuts of a
// 1,772-element first call, in 4 steps).
TEST(ShrinkResume, CallsOfOneByteSizeAreCutTogetherBeforeTheFineCuts) {
  Case c;
  c.p = 2;
  c.dtype = DType::Float64;
  c.op = RedOp::Prod;
  c.count = 1772;
  c.data = DataClass::Exact;
  c.seed = 7;
  Case then = c;
  then.dtype = DType::Uint8;
  then.count = 1772 * 8;
  then.seed = 8;
  c.then.push_back(then);
  const auto fails = [](const Case& x) {
    return x.count > 0 && x.then.size() == 1 && x.count * dtype_size(x.dtype) == x.then[0].count * dtype_size(x.then[0].dtype);
  };
  ASSERT_TRUE(fails(c));
  const Shrunk s = shrink(c, fails);
  EXPECT_EQ(s.minimal.count, 1u);
  ASSERT_EQ(s.minimal.then.size(), 1u);
  EXPECT_EQ(s.minimal.then[0].count, 8u);
  EXPECT_LT(s.runs, 300u);
  std::printf("[ shrunk  ] %zu steps, %zu runs\n", s.steps, s.runs);
}
