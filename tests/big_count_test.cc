// Counts are size_t end to end: one all-reduce of 2^31 + 3 one-byte elements
// per rank at p = 2, in place, for each algorithm. Labelled "bigmem": it needs
// about 7 GiB and runs in the default build only (the sanitizer presets
// exclude the label).
#include <gtest/gtest.h>

#include <memory>

#include "harness/run/communicator.h"
#include "harness/world/thread_world.h"

using namespace collcheck;
using namespace std::chrono_literals;

class BigCount : public ::testing::TestWithParam<const char*> {};

TEST_P(BigCount, CountAboveTwoToTheThirtyOneIsReducedExactly) {
  const size_t count = (size_t{1} << 31) + 3;
  ThreadWorld world(2);
  std::vector<std::unique_ptr<uint8_t[]>> buf;
  for (int r = 0; r < 2; ++r) {
    buf.emplace_back(new uint8_t[count]);
    for (size_t i = 0; i < count; ++i) buf.back()[i] = static_cast<uint8_t>(i * 7 + static_cast<size_t>(r) * 3);
  }
  auto run = world.run(
      [&](RankContext& c) {
        Communicator comm(c.links(), {GetParam(), 600000ms});
        uint8_t* b = buf[static_cast<size_t>(c.rank())].get();
        comm.all_reduce(b, b, count, DType::Uint8, RedOp::Sum);
      },
      900s);
  ASSERT_TRUE(run.ok()) << run.failures();
  size_t wrong = 0, first = 0;
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < count; ++i) {
      const uint8_t want = static_cast<uint8_t>(2 * (i * 7) + 3);
      if (buf[static_cast<size_t>(r)][i] != want && wrong++ == 0) first = i;
    }
  EXPECT_EQ(wrong, 0u) << "first wrong element " << first;
  // The last elements lie beyond 2^31: check them explicitly.
  EXPECT_EQ(buf[1][count - 1], static_cast<uint8_t>(2 * ((count - 1) * 7) + 3));
}

INSTANTIATE_TEST_SUITE_P(All, BigCount, ::testing::Values("ring", "tree", "dbtree"));
