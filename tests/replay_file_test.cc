// `--replay @FILE` with several tokens, one per line (issue 31, item 2): the
// earlier cases a failure needs run first, once each, in the same process,
// and the last token is the case; a bad line is named, exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/run_command.h"

namespace {

std::string write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name + "_" + std::to_string(::getpid());
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(ReplayFile, EarlierCasesRunFirstThenTheCase) {
  // thread_plan_cache keeps each rank thread's chunk layout keyed on the count:
  // a count-8 case at p = 4 on the shared rank threads, then the same count at
  // p = 2, which reuses the 4-chunk layout and never reduces its tail.
  const std::string mutant = std::string(MUTANT_DIR) + "/thread_plan_cache.so";
  // Cases on the shared rank threads (shared_threads: 1 in 4 by the case's seed,
  // p and count): found by trying seeds, and checked by the replay itself.
  const std::string alone = "v1:p2:int32:sum:s1:n8:oop:d:exact:3";
  const auto a = testutil::collcheck("verify --impl plugin:" + mutant + " --replay " + alone, 120);
  ASSERT_EQ(a.code, 0) << "the case alone passes on fresh threads\n" << a.out;
  bool caught = false;
  for (int s = 1; s <= 40 && !caught; ++s) {
    const std::string before = "v1:p4:int32:sum:s1:n8:oop:d:exact:" + std::to_string(s);
    const std::string file = write("replay_file", before + "\n" + alone + "\n");
    const auto r = testutil::collcheck("verify --impl plugin:" + mutant + " --replay @" + file, 120);
    ASSERT_NE(r.out.find("ran the 1 earlier case(s) of the file first, in this process"), std::string::npos) << r.out;
    if (r.code == 1) {
      caught = true;
      EXPECT_NE(r.out.find("FAIL: property agrees-with-oracle"), std::string::npos) << r.out;
    } else {
      ASSERT_EQ(r.code, 0) << r.out;
    }
    std::filesystem::remove(file);
  }
  EXPECT_TRUE(caught) << "no earlier case on the shared threads made the p = 2 case fail";
}

TEST(ReplayFile, ABadLineIsNamedAndSeveralTokensNeedAFile) {
  const std::string file = write("replay_bad", "v1:p2:int32:sum:s1:n8:oop:d:exact:3\nnot-a-token\n");
  const auto r = testutil::collcheck("verify --impl ring --replay @" + file, 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--replay: line 2 of " + file), std::string::npos) << r.out;
  std::filesystem::remove(file);
}

// In the MPI world no fresh process can be started: "steady here", and a
// second replay line that runs the case after the cases before it.
TEST(ReplayFile, TheMpiWorldSaysSteadyHereAndKeepsTheCasesBeforeIt) {
  const auto r = testutil::run_command(testutil::mpirun(3) + " verify --world mpi --impl plugin:" MUTANT_DIR
                                                               "/double_contribution.so --cases 200 --seed 1",
                                       600);
  ASSERT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("  steady here: the minimal case failed 3 of 3 replays in this process; a fresh process "
                       "cannot be started from it (the MPI world)"),
            std::string::npos)
      << r.out;
  const auto at = r.out.find("  replay after the ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto file = r.out.find("--replay @", at);
  ASSERT_NE(file, std::string::npos) << r.out;
  const std::string path = r.out.substr(file + 10, r.out.find('\n', file) - file - 10);
  const auto again = testutil::run_command(testutil::mpirun(3) + " verify --world mpi --impl plugin:" MUTANT_DIR
                                                                   "/double_contribution.so --replay @" + path,
                                           300);
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_NE(again.out.find("earlier case(s) of the file first"), std::string::npos) << again.out;
}
