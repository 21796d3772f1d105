// Bad input and hostile conditions, continued (robustness_test): faults that
// never fire, runs too big for memory refused up front, large calls shared.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/robustness_test_util.h"

namespace {

// A fault that never fires (a transfer index past the last transfer, a slow
// link on an edge the algorithm never uses) is said, with why, instead of the
// run reading like a missed diagnosis.
TEST(Robustness, AFaultThatNeverFiresIsSaid) {
  auto r = replay(kDir + "fault_never_fires.yaml.bad");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("note: faults[0] (corrupted_payload, line 6) never fired: transfer 1000 (counted from 0) never "
                       "came: 6 non-empty transfer(s) went from rank 0 to rank 1"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("got no diagnosis (a fault never fired: see the note above)"), std::string::npos) << r.out;
  r = replay(kDir + "fault_unused_edge.yaml.bad");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("note: faults[0] (slow_link, line 7) never fired: nothing was sent from rank 0 to rank 2 in this "
                       "run: ring does not use that edge"),
            std::string::npos)
      << r.out;
  // A fault that fires says nothing of the kind.
  r = replay(SOURCE_DIR "/examples/bugs/flipped_bit.yaml");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("never fired"), std::string::npos) << r.out;
}

}  // namespace

namespace {

// A sweep whose largest row cannot fit the memory available is refused before
// its header, naming the largest size that would fit (it ran 47-67 s, then
// died). 100 TiB per rank fits no machine this runs on.
TEST(Robustness, ASweepTooBigForMemoryIsRefusedUpFront) {
  auto r = testutil::collcheck("sweep -b 100T -e 100T --ranks 2", 60);
  expect_usage_error(r, "the largest row (109951162777600 bytes per rank, 2 rank(s) in this process) needs about 800.0 TiB");
  EXPECT_NE(r.out.find("the largest that fits is -e "), std::string::npos) << r.out;
  r = testutil::collcheck("sweep -N 10000000000000 -d float64 --ranks 2", 60);
  expect_usage_error(r, "the largest that fits is -N ");
}

// verify is refused up front when the largest case it can draw (its largest
// count at --max-ranks) cannot fit, naming what would, each flag alone; a
// --replay case likewise. Under mpirun every process agrees, and the
// processes of one node share its memory.
TEST(Robustness, AVerifyTooBigForMemoryIsRefusedUpFront) {
  auto r = testutil::collcheck("verify --max-count 16777216 --max-ranks 512 --cases 1", 60);
  expect_usage_error(r, "the largest case verify can draw (512 rank(s) in this process, up to 16777216 elements");
  EXPECT_NE(r.out.find("what fits, each alone: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--max-ranks "), std::string::npos) << r.out;
  r = testutil::collcheck("verify --replay v1:p512:float64:sum:s1:n4294967296:oop:d:random:1", 60);
  expect_usage_error(r, "--replay: the case needs about ");
  // Sizes take suffixes here too.
  r = testutil::collcheck("verify --large-bytes 512M --cases 1", 60);
  expect_usage_error(r, "--large-bytes must be at most 268435456 (256M), got 536870912");
  // What fits runs: the default space at its largest is well under 1 GiB.
  r = testutil::collcheck("verify --large-bytes 1M --cases 5 --seed 7", 120);
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(Robustness, AnMpiVerifyTooBigForMemoryIsRefusedByEveryProcess) {
  const auto r = testutil::run_command(
      testutil::mpirun(2) + " verify --world mpi --replay v1:p2:float64:sum:s1:n8589934592:oop:d:random:1", 120);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("collcheck: error: --replay: the case needs about "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(per process: 2 processes share this node)"), std::string::npos) << r.out;
}

}  // namespace

namespace {

// replay's oracle check costs O(p) per call, not O(p^2): a large call is
// checked on each rank's share of the elements, and the ranks' results are
// compared by hash. A mutant whose ranks end with different results, each
// right on its own share, is still caught and named.
TEST(Robustness, ReplaysOracleCheckSharesLargeCallsAndStillCatchesDifferingRanks) {
  const std::string file = testing::TempDir() + "/differing.yaml";
  std::ofstream(file) << "world: {ranks: 4}\nimpl: plugin:" MUTANT_DIR "/missing_allgather_step.so\nprogram:\n"
                         "  - all_reduce: {tag: b, count: 8193}\n";
  const auto r = replay(file);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("wrong_result [ranks 0, 1, 2, 3] [call #1]: call #1 (b): the ranks hold different results ("),
            std::string::npos)
      << r.out;
  // The reference ring at 16 ranks x 100 calls of 4096 floats: every result checked, none wrong.
  const std::string clean = testing::TempDir() + "/clean16.yaml";
  {
    std::ofstream c(clean);
    c << "world: {ranks: 16}\ndeadline: 30\nprogram:\n";
    for (int i = 0; i < 100; ++i) c << "  - all_reduce: {tag: c" << i << ", count: 4096}\n";
  }
  const auto ok = replay(clean);
  EXPECT_EQ(ok.code, 0) << ok.out.substr(0, 3000);
  EXPECT_NE(ok.out.find("diagnosis: none (clean run, 1600 results checked against the oracle)"), std::string::npos)
      << ok.out.substr(0, 3000);
}

}  // namespace
