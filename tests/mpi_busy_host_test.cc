// The MPI world's verdicts on a busy host (issue 33: "in the thread and MPI
// worlds, make the slow-link detector hold under load"). Real processes
// under mpirun while 8 other processes spin on the 2 cores: a rank that
// polls waits its turn behind them for 6-20 ms at a time.
//
// Measured on the 2-core host under 8 busy processes, 200 cases a run:
// - before the stall meter read each rank thread's run-queue wait: about 1
//   case in 100 wrong on a slow link;
// - before abandoned requests were reaped with one MPI_Testsome at a run's
//   drain (impl/mpi_links.cc), not one MPI_Test each per post (each yields
//   the core, oversubscribed): 25-28 wrong cases a run (calls past their
//   0.3 s deadline, 3-5 slow links missed), on seeds 812891234263119602 and
//   14170844337897969340;
// - before every process took rank 0's time origin (harness/world/mpi_clock.h;
//   each had its own, up to 15 ms apart under this load): 6 wrong in 2,800
//   cases, none of another kind (a healthy double-tree edge named at 16-23 ms
//   5 times, one 90 ms link missed): about 1 run in 14 had 2 or more;
// - now: 1,400 of 1,400 as injected (7 fresh seeds, 200 cases each).
// So the test allows one wrong case of any kind in its 200, and prints each.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <regex>
#include <string>

#include "tests/run_command.h"

namespace {

TEST(DetectionMpi, NoFalseAlarmOrMissOnABusyHost) {
  const uint64_t seed = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  std::printf("seed %llu (fresh; rerun: mpirun -np 3 collcheck faults --world mpi --random 200 --seed %llu, with 8 "
              "busy processes)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  testutil::CommandResult r;
  {
    testutil::BusyHost host(8);
    r = testutil::run_command(testutil::mpirun(3) + " faults --world mpi --random 200 --progress off --seed " +
                                  std::to_string(seed),
                              600);
  }
  ASSERT_NE(r.code, 124) << "timed out:\n" << r.out;
  const std::smatch tally = [&] {
    std::smatch m;
    std::regex_search(r.out, m, std::regex(R"((\d+) of 200 cases diagnosed as injected)"));
    return m;
  }();
  ASSERT_FALSE(tally.empty()) << "no tally line:\n" << r.out;
  // The slow-link cases drawn: each must be named (no miss).
  std::smatch drawn;
  ASSERT_TRUE(std::regex_search(r.out, drawn, std::regex(R"(slow_link (\d+)/(\d+))"))) << r.out;
  std::printf("slow-link cases drawn: %s, named: %s\n", drawn[2].str().c_str(), drawn[1].str().c_str());
  EXPECT_GE(std::stoi(drawn[2]), 1) << "no slow-link case was drawn: the test checked no miss";
  // Every case that was not as injected, one line each: a slow link missed
  // or named where none was injected, or any other wrong diagnosis or run
  // past its limit.
  const std::regex missed(R"(case (\d+): (\S+)[^\n]*?: ([^\n]*))");
  int slow_link_wrong = 0, other = 0;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), missed); it != std::sregex_iterator(); ++it) {
    const std::string fault = (*it)[2], why = (*it)[3];
    const bool slow = fault == "slow_link" || why.find("slow_link") != std::string::npos;
    ++(slow ? slow_link_wrong : other);
    std::printf("%s error: case %s: %s: %s\n", slow ? "slow-link" : "other", (*it)[1].str().c_str(), fault.c_str(),
                why.c_str());
  }
  std::printf("%s of 200 cases as injected; slow-link errors %d, other errors %d (at most 1 in all allowed)\n",
              tally[1].str().c_str(), slow_link_wrong, other);
  if (slow_link_wrong + other > 0) std::printf("%s\n", r.out.c_str());
  EXPECT_LE(slow_link_wrong + other, 1) << "cases diagnosed wrong, or past their limit, on a busy host";
}

}  // namespace
